package storage

import (
	"context"
	"fmt"
	"io"
	"sync"
)

// What every driver's Put does the same way: validate the key and the
// options, stream the content to where the driver stages it while hashing
// it, honour cancellation, and refuse content whose digest is not the one
// WithDigest asked for. Drivers differ only in where they stage and how
// they publish.

// PreparePut validates key and applies opts, for the start of a driver's
// Put.
func PreparePut(key string, opts []PutOption) (PutOptions, error) {
	if err := ValidateKey(key); err != nil {
		return PutOptions{}, err
	}
	return NewPutOptions(opts...)
}

// copyBufSize is the buffer of StageContent's copy: large enough that a
// big object is not copied in thousands of small writes.
const copyBufSize = 256 << 10

// copyBufs recycles StageContent's buffers: a fresh one per Put was most of
// the garbage of a pipeline node that writes a few small objects, and the
// collector's time with it.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, copyBufSize); return &b }}

// StageContent copies r into w, the driver's staging location, hashing it;
// it stops when ctx ends. It returns the object's info (without ModTime)
// or, wrapping ErrDigestMismatch, an error when o asks for another digest.
func (o PutOptions) StageContent(ctx context.Context, key string, w io.Writer, r io.Reader) (ObjectInfo, error) {
	h := NewHasher()
	buf := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(buf)
	if _, err := io.CopyBuffer(io.MultiWriter(w, h), ContextReader(ctx, r), *buf); err != nil {
		return ObjectInfo{}, err
	}
	info := ObjectInfo{Key: key, Size: h.Size(), Digest: h.Digest(), Metadata: o.Metadata}
	if err := o.CheckDigest(key, info.Digest); err != nil {
		return ObjectInfo{}, err
	}
	return info, nil
}

// OpError names the driver, the operation and the key (or prefix) in err,
// as every driver reports its errors ("fsstore: get \"a/b\": ..."); nil
// stays nil.
func OpError(driver, op, key string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %s %q: %w", driver, op, key, err)
}
