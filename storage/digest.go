package storage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"
)

const digestPrefix = "sha256:"

// Digest returns the digest of b in the form ObjectInfo.Digest uses.
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return FormatSHA256(sum[:])
}

// FormatSHA256 formats a SHA-256 sum as "sha256:<hex>".
func FormatSHA256(sum []byte) string { return digestPrefix + hex.EncodeToString(sum) }

// ValidateDigest checks that d has the form "sha256:<64 lower-case hex>".
func ValidateDigest(d string) error {
	hexSum, ok := strings.CutPrefix(d, digestPrefix)
	if !ok || len(hexSum) != 2*sha256.Size || strings.ToLower(hexSum) != hexSum {
		return fmt.Errorf("digest %q is not sha256:<64 lower-case hex digits>", d)
	}
	if _, err := hex.DecodeString(hexSum); err != nil {
		return fmt.Errorf("digest %q is not sha256:<64 lower-case hex digits>", d)
	}
	return nil
}

// Hasher is an io.Writer that computes the size and digest of what is
// written to it; drivers tee a Put's stream into one.
type Hasher struct {
	h hash.Hash
	n int64
}

// NewHasher returns an empty Hasher.
func NewHasher() *Hasher { return &Hasher{h: sha256.New()} }

func (h *Hasher) Write(p []byte) (int, error) {
	h.n += int64(len(p))
	return h.h.Write(p)
}

// Size is the number of bytes written so far.
func (h *Hasher) Size() int64 { return h.n }

// Digest is the digest of the bytes written so far.
func (h *Hasher) Digest() string { return FormatSHA256(h.h.Sum(nil)) }

// ContextReader returns a reader that reads from r until ctx is done, then
// fails with ctx's error. Drivers read a Put's stream through it so that a
// cancelled Put stops at the next read instead of publishing.
func ContextReader(ctx context.Context, r io.Reader) io.Reader {
	return &contextReader{ctx: ctx, r: r}
}

type contextReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *contextReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// VerifyReader wraps the content stream of an object described by info.
// It hashes what passes through and, where rc reports io.EOF, returns an
// error wrapping ErrDigestMismatch instead if the content's size or digest
// differ from info's. A recorded digest that is not well-formed fails the
// first Read. Errors are sticky, so a consumer that drops one error (as some
// buffering readers do when their buffer fills) sees it on the next Read.
// Reads fail with ctx's error once ctx is done. Drivers return it from Get.
func VerifyReader(ctx context.Context, rc io.ReadCloser, info ObjectInfo) io.ReadCloser {
	v := &verifier{ctx: ctx, rc: rc, want: info, hash: NewHasher()}
	if err := ValidateDigest(info.Digest); err != nil {
		v.err = fmt.Errorf("%w: %q: recorded %v", ErrDigestMismatch, info.Key, err)
	}
	return v
}

type verifier struct {
	ctx  context.Context
	rc   io.ReadCloser
	want ObjectInfo
	hash *Hasher
	err  error
}

func (v *verifier) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	if err := v.ctx.Err(); err != nil {
		v.err = fmt.Errorf("reading %q: %w", v.want.Key, err)
		return 0, v.err
	}
	n, err := v.rc.Read(p)
	v.hash.Write(p[:n])
	switch {
	case v.hash.Size() > v.want.Size:
		v.err = v.mismatch(fmt.Sprintf("more than the recorded %d bytes", v.want.Size))
	case errors.Is(err, io.EOF):
		v.err = v.checkEOF()
	case err != nil:
		v.err = fmt.Errorf("reading %q: %w", v.want.Key, err)
	}
	return n, v.err
}

func (v *verifier) checkEOF() error {
	if got := v.hash.Size(); got != v.want.Size {
		return v.mismatch(fmt.Sprintf("%d bytes, recorded size %d", got, v.want.Size))
	}
	if got := v.hash.Digest(); got != v.want.Digest {
		return v.mismatch(fmt.Sprintf("content hashes to %s, recorded %s", got, v.want.Digest))
	}
	return io.EOF
}

func (v *verifier) mismatch(problem string) error {
	return fmt.Errorf("%w: %q: %s", ErrDigestMismatch, v.want.Key, problem)
}

func (v *verifier) Close() error { return v.rc.Close() }
