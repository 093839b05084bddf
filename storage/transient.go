package storage

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
)

// IsTransient reports whether err looks like a server that is away for a
// while (refused or reset connections, timeouts, a server still starting)
// rather than a problem with the request or the data. Callers wait such
// errors out instead of counting them as failures. Missing objects, digest
// mismatches and cancelled contexts are never transient.
func IsTransient(err error) bool {
	if err == nil || errors.Is(err, ErrNotFound) || errors.Is(err, ErrDigestMismatch) ||
		errors.Is(err, ErrInvalidKey) || errors.Is(err, ErrNoSpace) || errors.Is(err, context.Canceled) {
		return false
	}
	// Not io.EOF nor io.ErrUnexpectedEOF: a truncated or empty input file
	// says the same, and must fail at once rather than be waited out.
	for _, e := range []error{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.EPIPE, syscall.ECONNABORTED,
		syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.ETIMEDOUT} {
		if errors.Is(err, e) {
			return true
		}
	}
	// Any other errno is a local failure (a full disk, a missing or
	// forbidden file), although syscall.Errno is a net.Error too.
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	// Errors that crossed a library boundary as text (minio-go and stages
	// that format rather than wrap).
	msg := strings.ToLower(err.Error())
	for _, s := range transientMessages {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

var transientMessages = []string{
	"connection refused", "connection reset", "broken pipe", "i/o timeout", "no route to host",
	"server not initialized", "please reduce your request rate", "service unavailable",
	"loading redis is loading the dataset", "tryagain", "masterdown",
}

// Unavailable is a Store whose every operation fails with err: what a
// read-only command gets when the configured store cannot be reached, so
// that it can still show what Redis knows and say what it cannot reach.
func Unavailable(err error) Store { return unavailable{err} }

type unavailable struct{ err error }

func (u unavailable) Put(context.Context, string, io.Reader, ...PutOption) (ObjectInfo, error) {
	return ObjectInfo{}, u.err
}
func (u unavailable) Get(context.Context, string) (io.ReadCloser, ObjectInfo, error) {
	return nil, ObjectInfo{}, u.err
}
func (u unavailable) Stat(context.Context, string) (ObjectInfo, error)   { return ObjectInfo{}, u.err }
func (u unavailable) List(context.Context, string) ([]ObjectInfo, error) { return nil, u.err }
func (u unavailable) Delete(context.Context, string) error               { return u.err }
func (u unavailable) Close() error                                       { return nil }
