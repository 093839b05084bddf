package fsstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sync"

	"github.com/nerflow/nerflow/storage"
)

// Durability in batches. A Put syncs its file and its directory (and every
// directory it created) before it returns: two to five fsyncs, each a
// journal commit of the filesystem, for an object of a few bytes. A batch's
// Puts skip them and Flush syncs everything they touched at once, in
// parallel, so that the filesystem commits them together (ext4 and XFS
// fold concurrent fsyncs into one journal commit). A node's outputs cost
// then about one commit instead of one per file and directory.

// batch is a storage.Batch over a Store.
type batch struct {
	s     *Store
	mu    sync.Mutex
	paths map[string]bool // files and directories to sync by path
	// open are files put through the batch, kept open for Flush to sync
	// them without opening them again (an open is a lookup in the
	// directory, most of the cost of a small Put); at most maxOpenFiles,
	// the others are synced by path.
	open map[string]*os.File
}

// maxOpenFiles bounds the files a batch keeps open between Put and Flush.
const maxOpenFiles = 64

var _ storage.Batcher = (*Store)(nil)

// NewBatch implements storage.Batcher.
func (s *Store) NewBatch() storage.Batch {
	return &batch{s: s, paths: map[string]bool{}, open: map[string]*os.File{}}
}

// addFile records the file just published at path, still open as f.
func (b *batch) addFile(path string, f *os.File) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if old := b.open[path]; old != nil {
		old.Close() // replaced: its content is no longer the object's
	}
	if len(b.open) >= maxOpenFiles && b.open[path] == nil {
		f.Close()
		b.paths[path] = true
		return
	}
	b.open[path] = f
}

func (b *batch) add(paths ...string) {
	b.mu.Lock()
	for _, p := range paths {
		b.paths[p] = true
	}
	b.mu.Unlock()
}

// maxParallelSyncs bounds the files a Flush holds open at once.
const maxParallelSyncs = 32

// Flush implements storage.Batch.
func (b *batch) Flush(ctx context.Context) error {
	b.mu.Lock()
	paths, open := b.paths, b.open
	b.paths, b.open = map[string]bool{}, map[string]*os.File{}
	b.mu.Unlock()
	sem := make(chan struct{}, maxParallelSyncs)
	errs := make(chan error, len(paths)+len(open))
	var wg sync.WaitGroup
	for p := range paths {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs <- syncPath(p)
		}()
	}
	for p, f := range open {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			err := syncFile(f)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				err = fmt.Errorf("%s: %w", p, err)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	if err := errors.Join(all...); err != nil {
		// Flush may be retried: everything is synced again, by path.
		b.add(slices.Collect(maps.Keys(paths))...)
		b.add(slices.Collect(maps.Keys(open))...)
		return fmt.Errorf("fsstore: flush: %w", err)
	}
	return ctx.Err()
}

// syncPath fsyncs a file or directory. One deleted since (by a Delete or a
// newer Put's rename over it) has nothing left to make durable.
func syncPath(p string) error {
	f, err := os.Open(p)
	if isMissing(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	return syncFile(f)
}

// Put implements storage.Store; the object is durable after Flush.
func (b *batch) Put(ctx context.Context, key string, r io.Reader, opts ...storage.PutOption) (storage.ObjectInfo, error) {
	info, err := b.s.put(ctx, key, r, opts, b)
	return info, storage.OpError(driver, "put", key, err)
}

func (b *batch) Get(ctx context.Context, key string) (io.ReadCloser, storage.ObjectInfo, error) {
	return b.s.Get(ctx, key)
}

func (b *batch) Stat(ctx context.Context, key string) (storage.ObjectInfo, error) {
	return b.s.Stat(ctx, key)
}

func (b *batch) List(ctx context.Context, prefix string) ([]storage.ObjectInfo, error) {
	return b.s.List(ctx, prefix)
}

func (b *batch) Delete(ctx context.Context, key string) error { return b.s.Delete(ctx, key) }

// Close implements storage.Store; it leaves the store open. Files not
// flushed are closed, and not made durable.
func (b *batch) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, f := range b.open {
		f.Close()
	}
	clear(b.open)
	return nil
}
