package fsstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/nerflow/nerflow/storage"
	"github.com/nerflow/nerflow/storage/fsstore"
	"github.com/nerflow/nerflow/storage/storagetest"
)

// A batch is a Store in its own right: the whole conformance suite holds
// for its Puts, which are published as they return.
func TestBatchConformance(t *testing.T) {
	var mu sync.Mutex
	stores := map[storage.Store]*fsstore.Store{}
	storagetest.Run(t, storagetest.Harness{
		New: func(t *testing.T) storage.Store {
			s := newStore(t).(*fsstore.Store)
			b := storage.NewBatch(s)
			mu.Lock()
			stores[b] = s
			mu.Unlock()
			return b
		},
		Corrupt: func(t *testing.T, b storage.Store, key string) {
			mu.Lock()
			s := stores[b]
			mu.Unlock()
			corrupt(t, s, key)
		},
	})
}

func TestBatchFlush(t *testing.T) {
	ctx := context.Background()
	s := newStore(t).(*fsstore.Store)
	b := storage.NewBatch(s)
	keys := []string{"artifacts/k1/a1/out/i", "artifacts/k1/a1/out.manifest.json", "artifacts/k1/a1/log/x"}
	for _, k := range keys {
		if _, err := storage.PutBytes(ctx, b, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	// Published before the flush, and through the store itself.
	for _, k := range keys {
		got, _, err := storage.GetBytes(ctx, s, k)
		if err != nil || string(got) != k {
			t.Fatalf("%s before Flush: %q, %v", k, got, err)
		}
	}
	// An object deleted before the flush (its directory pruned with it)
	// leaves nothing to sync, which is no error.
	if err := b.Delete(ctx, "artifacts/k1/a1/log/x"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(s.Root(), "artifacts/k1/a1/log")); !os.IsNotExist(err) {
		t.Fatalf("directory of the deleted object still there: %v", err)
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatalf("second Flush: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// Closing the batch leaves the store usable.
	if _, err := storage.PutBytes(ctx, s, "after", []byte("x")); err != nil {
		t.Fatal(err)
	}
}

// A batch closed without a flush closes the files it kept open for it.
func TestBatchCloseReleasesFiles(t *testing.T) {
	fds := func() int { return openFiles(t) }
	ctx := context.Background()
	s := newStore(t)
	before := fds()
	b := storage.NewBatch(s)
	for _, k := range []string{"a/1", "a/2", "b/3"} {
		if _, err := storage.PutBytes(ctx, b, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	if n := fds(); n <= before {
		t.Logf("no file kept open for Flush (%d, %d)", before, n)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if n := fds(); n != before {
		t.Errorf("%d files open after Close, %d before the batch", n, before)
	}
}

// A batch keeps at most 64 files open for Flush; the others are synced by
// path, and Flush closes every file it kept.
func TestBatchFlushManyFiles(t *testing.T) {
	fds := func() int { return openFiles(t) }
	ctx := context.Background()
	s := newStore(t)
	before := fds()
	b := storage.NewBatch(s)
	defer b.Close()
	for i := range 100 {
		k := fmt.Sprintf("d%d/f%d", i%3, i)
		if _, err := storage.PutBytes(ctx, b, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	if n := fds(); n > before+64 {
		t.Errorf("%d files open before Flush, %d before the batch: want at most 64 more", n, before)
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := fds(); n != before {
		t.Errorf("%d files open after Flush, %d before the batch", n, before)
	}
	for i := range 100 {
		k := fmt.Sprintf("d%d/f%d", i%3, i)
		if got, _, err := storage.GetBytes(ctx, s, k); err != nil || string(got) != k {
			t.Errorf("%s after Flush: %q, %v", k, got, err)
		}
	}
}

// openFiles counts the files this process has open.
func openFiles(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd to count open files")
	}
	return len(entries)
}
