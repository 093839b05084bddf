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
// Puts skip them and Flush syncs everything they touched at once, so that
// the filesystem commits them together. A node's outputs cost then about
// one commit instead of one per file and directory.
//
// Flush syncs the files first, all at once, then the directories, all at
// once. Syncing a new file allocates its blocks, which changes metadata,
// and commits the journal transaction holding everything done before: the
// directory entries of the batch too, so on a journaling filesystem (ext4,
// XFS) the directories' syncs that follow find their changes committed and
// wait for nothing. Synced together, a directory's sync could commit
// first and the file's allocation need a second commit.

// batch is a storage.Batch over a Store.
type batch struct {
	s  *Store
	mu sync.Mutex
	// files are the files put through the batch. Up to maxOpenFiles are
	// kept open for Flush to sync them without opening them again (an open
	// is a lookup in the directory, most of the cost of a small Put); the
	// others (nil) are synced by path.
	files map[string]*os.File
	dirs  map[string]bool // directories whose entries changed
	open  int             // non-nil entries of files
}

// maxOpenFiles bounds the files a batch keeps open between Put and Flush.
const maxOpenFiles = 64

var _ storage.Batcher = (*Store)(nil)

// NewBatch implements storage.Batcher.
func (s *Store) NewBatch() storage.Batch {
	return &batch{s: s, files: map[string]*os.File{}, dirs: map[string]bool{}}
}

// addFile records the file just published at path, still open as f.
func (b *batch) addFile(path string, f *os.File) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if old := b.files[path]; old != nil {
		old.Close() // replaced: its content is no longer the object's
		b.open--
	}
	if b.open >= maxOpenFiles {
		f.Close()
		f = nil
	} else {
		b.open++
	}
	b.files[path] = f
}

// addDirs records directories whose entries changed.
func (b *batch) addDirs(dirs ...string) {
	b.mu.Lock()
	for _, d := range dirs {
		b.dirs[d] = true
	}
	b.mu.Unlock()
}

// maxParallelSyncs bounds the files a Flush holds open at once.
const maxParallelSyncs = 32

// Flush implements storage.Batch.
func (b *batch) Flush(ctx context.Context) error {
	b.mu.Lock()
	files, dirs := b.files, b.dirs
	b.files, b.dirs, b.open = map[string]*os.File{}, map[string]bool{}, 0
	b.mu.Unlock()
	err := syncAll(files, func(p string, f *os.File) error {
		if f == nil {
			return syncPath(p)
		}
		err := syncFile(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	})
	if err == nil {
		err = syncAll(dirs, func(p string, _ bool) error { return syncPath(p) })
	}
	if err != nil {
		// Flush may be retried: everything is synced again, by path.
		b.mu.Lock()
		for p, f := range files {
			if f != nil {
				f.Close() // a no-op error if closed already
			}
			if _, ok := b.files[p]; !ok {
				b.files[p] = nil
			}
		}
		b.mu.Unlock()
		b.addDirs(slices.Collect(maps.Keys(dirs))...)
		return fmt.Errorf("fsstore: flush: %w", err)
	}
	return ctx.Err()
}

// syncAll runs do on every entry of m at once (at most maxParallelSyncs at
// a time) and joins their errors; a single entry is synced inline.
func syncAll[V any](m map[string]V, do func(string, V) error) error {
	wrap := func(p string, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		return nil
	}
	if len(m) == 1 {
		for p, v := range m {
			return wrap(p, do(p, v))
		}
	}
	sem := make(chan struct{}, maxParallelSyncs)
	errs := make(chan error, len(m))
	for p, v := range m {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			errs <- wrap(p, do(p, v))
		}()
	}
	var all []error
	for range m {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
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
	return info, b.s.putError(key, err)
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
	for p, f := range b.files {
		if f != nil {
			f.Close()
			b.files[p] = nil
		}
	}
	b.open = 0
	return nil
}
