// Package all registers every storage driver; programs import it for its
// side effect so that storage.Open understands every URL scheme:
//
//	import _ "github.com/nerflow/nerflow/storage/all"
package all

import (
	_ "github.com/nerflow/nerflow/storage/fsstore" // file://
	_ "github.com/nerflow/nerflow/storage/s3store" // s3://
)
