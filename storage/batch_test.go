package storage_test

import (
	"context"
	"testing"

	"github.com/nerflow/nerflow/storage"
	"github.com/nerflow/nerflow/storage/fsstore"
)

// A driver without batches (hidden here behind a struct) gets a batch whose
// Puts are the store's own and whose Flush has nothing left to do.
func TestNewBatchWithoutBatcher(t *testing.T) {
	ctx := context.Background()
	fs, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	plain := struct{ storage.Store }{fs}
	b := storage.NewBatch(plain)
	if _, err := storage.PutBytes(ctx, b, "a/b", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	got, _, err := storage.GetBytes(ctx, plain, "a/b")
	if err != nil || string(got) != "x" {
		t.Fatalf("after the batch was closed: %q, %v", got, err)
	}
	if _, ok := storage.NewBatch(fs).(interface{ Root() string }); ok {
		t.Error("the filesystem driver's batch is the store itself")
	}
}
