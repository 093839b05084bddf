package server_test

import (
	"go/build"
	"slices"
	"testing"
)

// The server knows the operating packages only by its interfaces (the
// package doc): their adapters live in server/backend. An import of one of
// them into package server, or of asynq or Redis that only the adapters
// talk to, fails here.
func TestServerImportsNoOperatingPackage(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, banned := range []string{
		"github.com/nerflow/nerflow/registry",
		"github.com/nerflow/nerflow/schedule",
		"github.com/nerflow/nerflow/workers",
		"github.com/hibiken/asynq",
		"github.com/redis/go-redis/v9",
	} {
		if slices.Contains(pkg.Imports, banned) {
			t.Errorf("package server imports %s: adapt it in server/backend instead", banned)
		}
	}
}
