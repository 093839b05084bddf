// Package storage is nerflow's one portable interface to artifact storage.
//
// Every artifact a pipeline produces (corpora, gazetteers, embeddings,
// checkpoints, predictions, reports) is written through a Store. Drivers
// register themselves by URL scheme, the way database/sql drivers do, so that
// configuration picks the backend with a URL:
//
//	file:///var/lib/nerflow          local directory (the embedded default)
//	s3://bucket/prefix?endpoint=...  MinIO or any S3 server
//
// Objects are immutable once published: Put writes to a staging location and
// publishes atomically, so a reader never sees a partial object. Every object
// carries the SHA-256 digest of its content; Get verifies it while streaming
// and reports ErrDigestMismatch at the end of a corrupted object.
package storage

import (
	"context"
	"errors"
	"io"
	"time"
)

// Errors returned by every driver; test them with errors.Is.
var (
	ErrNotFound       = errors.New("storage: object not found")
	ErrDigestMismatch = errors.New("storage: digest mismatch")
	ErrInvalidKey     = errors.New("storage: invalid key")
)

// ObjectInfo describes one stored object.
type ObjectInfo struct {
	Key     string    `json:"key"`
	Size    int64     `json:"size"`
	Digest  string    `json:"digest"` // "sha256:<hex>" of the content
	ModTime time.Time `json:"mod_time"`
	// Metadata is small user metadata stored with the object (for example
	// the content type); keys are lower-case.
	Metadata map[string]string `json:"metadata,omitempty"`
}

// Store is implemented by each storage driver. Keys are slash-separated
// relative paths ("runs/abc/manifest.json"); see ValidateKey.
type Store interface {
	// Put streams r into key and publishes it atomically when r is
	// exhausted. An existing object under key is replaced.
	Put(ctx context.Context, key string, r io.Reader, opts ...PutOption) (ObjectInfo, error)
	// Get opens key for reading. The reader verifies the digest as it is
	// consumed: its Read returns ErrDigestMismatch instead of io.EOF when
	// the bytes do not match the recorded digest.
	Get(ctx context.Context, key string) (io.ReadCloser, ObjectInfo, error)
	// Stat returns the object's info without reading it.
	Stat(ctx context.Context, key string) (ObjectInfo, error)
	// List returns the objects whose keys start with prefix, sorted by key.
	List(ctx context.Context, prefix string) ([]ObjectInfo, error)
	// Delete removes key; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// Close releases the driver's resources.
	Close() error
}
