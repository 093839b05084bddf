// Package storage is nerflow's one portable interface to artifact storage.
//
// Every artifact a pipeline produces (corpora, gazetteers, embeddings,
// checkpoints, predictions, reports) is written through a Store. Drivers
// register themselves by URL scheme, the way database/sql drivers do, so that
// configuration picks the backend with a URL (see Open):
//
//	file://.nerflow/store            local directory (the embedded default)
//	file:///var/lib/nerflow          the same, with an absolute path
//	s3://bucket/prefix?endpoint=...  MinIO or any S3 server
//
// Programs import the drivers they want, usually all of them at once with
// a blank import of github.com/nerflow/nerflow/storage/all.
//
// Objects are published atomically: Put streams to a staging location and
// publishes when the stream ends, so a reader sees the previous object or the
// new one, never a partial one, and a Put that fails or is cancelled leaves
// nothing behind. Every object carries the SHA-256 digest of its content; Get
// verifies it while streaming and reports ErrDigestMismatch at the end of a
// corrupted object.
//
// On top of the Store interface this package has helpers that work with any
// driver (PutBytes, GetBytes, PutJSON, GetJSON); package storage/artifact
// adds manifests, which group stored files into one artifact.
package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// Errors returned by every driver; test them with errors.Is.
var (
	ErrNotFound = errors.New("storage: object not found")
	// ErrDigestMismatch reports stored bytes that fail their integrity
	// check: content that does not hash to the recorded digest or has the
	// wrong length, or a record of the digest that cannot be read. Put
	// returns it too when the content does not match WithDigest.
	ErrDigestMismatch = errors.New("storage: digest mismatch")
	ErrInvalidKey     = errors.New("storage: invalid key")
	// ErrExists is Put's error, with IfAbsent, when key holds an object.
	ErrExists = errors.New("storage: object exists")
	// ErrNoSpace is Put's error when the store, or the disk under it, is
	// full (see NoSpace). Nothing was published.
	ErrNoSpace = errors.New("no space left")
)

// NoSpace is the error of a Put of key that failed for want of space in
// where (a directory, a bucket's URL): it says so in words, and wraps both
// ErrNoSpace and the driver's error.
func NoSpace(where, key string, err error) error {
	return fmt.Errorf("%w on %s while writing %s: %w", ErrNoSpace, where, key, err)
}

// ObjectInfo describes one stored object.
type ObjectInfo struct {
	Key     string    `json:"key"`
	Size    int64     `json:"size"`
	Digest  string    `json:"digest"` // "sha256:<hex>" of the content
	ModTime time.Time `json:"mod_time"`
	// Metadata is small user metadata stored with the object (for example
	// the content type); keys are lower-case. See WithMetadata.
	Metadata map[string]string `json:"metadata,omitempty"`
}

// Store is implemented by each storage driver. Keys are slash-separated
// relative paths ("runs/abc/manifest.json"); see ValidateKey.
//
// A portable set of keys never uses one key as a "directory" of another
// ("a/b" and "a/b/c" together): object stores allow it, but the filesystem
// driver cannot hold both and fails the second Put.
type Store interface {
	// Put streams r into key and publishes it atomically when r is
	// exhausted. An existing object under key is replaced. If r fails, ctx
	// is cancelled or the content does not match WithDigest, nothing is
	// published and a previous object under key is left untouched.
	Put(ctx context.Context, key string, r io.Reader, opts ...PutOption) (ObjectInfo, error)
	// Get opens key for reading. The reader verifies the digest as it is
	// consumed: its Read returns ErrDigestMismatch instead of io.EOF when
	// the bytes do not match the recorded digest. A reader closed before
	// EOF has verified nothing. Cancelling ctx ends the reader's stream.
	Get(ctx context.Context, key string) (io.ReadCloser, ObjectInfo, error)
	// Stat returns the object's info without reading it.
	Stat(ctx context.Context, key string) (ObjectInfo, error)
	// List returns the objects whose keys start with prefix, sorted by key.
	// The prefix is a plain string prefix: "runs/a" matches "runs/a/x"
	// and "runs/ab"; end it with "/" to list one "directory". The empty
	// prefix lists every object.
	List(ctx context.Context, prefix string) ([]ObjectInfo, error)
	// Delete removes key; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// Close releases the driver's resources.
	Close() error
}

// LocalDir is the optional interface of drivers that keep their objects in
// a directory of this machine (the filesystem driver). Tools use it to show
// a path instead of a URL; code that reads or writes objects goes through
// Store whatever the driver.
type LocalDir interface {
	// Root is the absolute path of the store's directory.
	Root() string
}
