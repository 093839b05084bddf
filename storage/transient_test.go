package storage_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/nerflow/nerflow/storage"
)

func TestIsTransient(t *testing.T) {
	// A real refused connection, as a client sees a stopped server.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, refused := net.Dial("tcp", addr)
	if refused == nil {
		t.Skip("nothing refused the connection")
	}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("looking up cache: %w", refused), true},
		{errors.New(`Get "http://minio:9000/b/k": dial tcp 10.0.0.6:9000: connect: connection refused`), true},
		{errors.New("Server not initialized yet, please try again."), true},
		{fmt.Errorf("reading: %w", storage.ErrNotFound), false},
		{fmt.Errorf("reading: %w", storage.ErrDigestMismatch), false},
		{fmt.Errorf("decoding: %w", io.EOF), false},
		{fmt.Errorf("reading corpus: %w", io.ErrUnexpectedEOF), false},
		{context.Canceled, false},
		// A full disk, a missing or forbidden local file: their errnos are
		// net.Errors too, but no server is away.
		{&fs.PathError{Op: "write", Path: "/data/x", Err: syscall.ENOSPC}, false},
		{storage.NoSpace("/data", "k", &fs.PathError{Op: "write", Path: "/data/k", Err: syscall.ENOSPC}), false},
		{fmt.Errorf("opening corpus: %w", &fs.PathError{Op: "open", Path: "/data/x", Err: syscall.ENOENT}), false},
		{&fs.PathError{Op: "open", Path: "/data/x", Err: syscall.EACCES}, false},
		{&net.OpError{Op: "read", Net: "tcp", Err: &os.SyscallError{Syscall: "read", Err: syscall.ECONNRESET}}, true},
		{errors.New("param \"types\": want a list"), false},
		{nil, false},
	} {
		if got := storage.IsTransient(c.err); got != c.want {
			t.Errorf("IsTransient(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
