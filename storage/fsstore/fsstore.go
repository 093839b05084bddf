// Package fsstore is the filesystem driver of package storage, the embedded
// default: every object is one file under a root directory. It registers the
// URL scheme "file": file://.nerflow/store names a directory relative to the
// working directory, file:///var/lib/nerflow an absolute one (everything
// after "file://" is the path, taken literally).
//
// # Layout
//
// The object under key k is the file <root>/<k>. The file holds the content
// followed by a trailer: the object's record (digest, size, user metadata)
// as JSON, then a 16-byte footer, the JSON's length as a big-endian uint64
// and the magic "nerflow1". `head -c SIZE` gives the content back.
//
// The record lives in the same file as the content, not in a sidecar, because
// then one rename publishes both: a content file and a sidecar are two
// renames, and a reader between them (or a crash) pairs new content with an
// old digest. With one file, a reader holding it open keeps reading the
// version it opened even while a Put replaces it.
//
// # Publishing
//
// Put writes to a staging file named ".nerflow-tmp-<random>" in the
// object's own directory (same directory, so same filesystem, so rename is
// atomic), hashing as it writes, then appends the trailer, fsyncs the file,
// renames it over the key and fsyncs the directory. A failed or cancelled
// Put removes its staging file; one interrupted by a crash leaves it behind,
// invisible, for RemoveStale. Staging names start with
// storage.ReservedPrefix, which no key segment may, so they never collide
// with or show up as objects. Delete removes directories it leaves empty.
//
// A filesystem cannot hold a file and a directory under one name, so a key
// cannot be both an object and the directory of other keys ("a/b" and
// "a/b/c"); Put reports the conflict.
package fsstore

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/nerflow/nerflow/storage"
)

// Scheme is the URL scheme of this driver.
const Scheme = "file"

// driver names the driver in its errors.
const driver = "fsstore"

func init() {
	storage.Register(Scheme, func(_ context.Context, rawURL string) (storage.Store, error) {
		dir := strings.TrimPrefix(rawURL, Scheme+"://")
		if dir == "" {
			return nil, errors.New("fsstore: the URL names no directory (want file://DIR)")
		}
		return Open(dir)
	})
}

const (
	magic      = "nerflow1"
	footerSize = 8 + len(magic)
	maxRecord  = 64 << 10 // a record holds at most 2 KiB of metadata
	tempPrefix = storage.ReservedPrefix + "-tmp-"
	// createAttempts bounds Put's retries when a concurrent Delete removes
	// the directory it just created (see createTemp).
	createAttempts = 10
)

// record is the JSON part of an object's trailer.
type record struct {
	Digest   string            `json:"digest"`
	Size     int64             `json:"size"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// Store is a storage.Store on a local directory. It is safe for concurrent
// use, also by several processes sharing the directory.
type Store struct {
	root string
}

var (
	_ storage.Store    = (*Store)(nil)
	_ storage.LocalDir = (*Store)(nil)
)

// Open opens the store rooted at dir, creating the directory if needed.
func Open(dir string) (*Store, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("fsstore: %w", err)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("fsstore: creating the store directory: %w", err)
	}
	return &Store{root: root}, nil
}

// Root is the absolute path of the store's directory.
func (s *Store) Root() string { return s.root }

// String returns the store's URL.
func (s *Store) String() string { return Scheme + "://" + s.root }

// Path returns the file that holds (or would hold) key.
func (s *Store) Path(key string) (string, error) {
	if err := storage.ValidateKey(key); err != nil {
		return "", err
	}
	return filepath.Join(s.root, filepath.FromSlash(key)), nil
}

// Put implements storage.Store.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, opts ...storage.PutOption) (storage.ObjectInfo, error) {
	info, err := s.put(ctx, key, r, opts, nil)
	return info, s.putError(key, err)
}

// putError is the error of a Put of key: a full disk said in words (its
// staging file is gone, nothing was published), others with the driver's
// prefix.
func (s *Store) putError(key string, err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return storage.NoSpace(s.root, key, err)
	}
	return storage.OpError(driver, "put", key, err)
}

// put publishes key. With a nil batch it makes the object durable before it
// returns; otherwise the batch records what Flush must sync.
func (s *Store) put(ctx context.Context, key string, r io.Reader, opts []storage.PutOption, b *batch) (storage.ObjectInfo, error) {
	o, err := storage.PreparePut(key, opts)
	if err != nil {
		return storage.ObjectInfo{}, err
	}
	path := filepath.Join(s.root, filepath.FromSlash(key))
	if err := ctx.Err(); err != nil {
		return storage.ObjectInfo{}, err
	}
	dir := filepath.Dir(path)
	f, err := s.createTemp(dir, b)
	if err != nil {
		return storage.ObjectInfo{}, err
	}
	published := false
	defer func() {
		if !published {
			f.Close()
			os.Remove(f.Name())
			s.prune(dir)
		}
	}()

	info, err := o.StageContent(ctx, key, f, r)
	if err != nil {
		return storage.ObjectInfo{}, err
	}
	if err := writeTrailer(f, record{Digest: info.Digest, Size: info.Size, Metadata: o.Metadata}); err != nil {
		return storage.ObjectInfo{}, err
	}
	if b == nil {
		if err := f.Sync(); err != nil {
			return storage.ObjectInfo{}, err
		}
	}
	fi, err := f.Stat()
	if err != nil {
		return storage.ObjectInfo{}, err
	}
	info.ModTime = fi.ModTime()
	// A batch keeps the file open for Flush to sync it (see batch.go).
	if b == nil {
		if err := f.Close(); err != nil {
			return storage.ObjectInfo{}, err
		}
	}
	// Cancellation during the fsync still counts: nothing is published.
	if err := ctx.Err(); err != nil {
		return storage.ObjectInfo{}, err
	}
	if o.IfAbsent {
		// link(2) fails where the name exists, atomically, where rename
		// would replace it.
		if err := os.Link(f.Name(), path); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return storage.ObjectInfo{}, fmt.Errorf("%w: %q", storage.ErrExists, key)
			}
			return storage.ObjectInfo{}, err
		}
		os.Remove(f.Name())
	} else if err := os.Rename(f.Name(), path); err != nil {
		if fi, statErr := os.Lstat(path); statErr == nil && fi.IsDir() {
			return storage.ObjectInfo{}, fmt.Errorf("%q is already the directory of other keys, so it cannot be an object too in a filesystem store", key)
		}
		return storage.ObjectInfo{}, err
	}
	published = true
	if b != nil {
		b.addFile(path, f)
		b.addDirs(dir)
		return info, nil
	}
	if err := syncDir(dir); err != nil {
		return storage.ObjectInfo{}, err
	}
	return info, nil
}

func writeTrailer(w io.Writer, rec record) error {
	js, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	trailer := make([]byte, 0, len(js)+footerSize)
	trailer = append(trailer, js...)
	trailer = binary.BigEndian.AppendUint64(trailer, uint64(len(js)))
	trailer = append(trailer, magic...)
	_, err = w.Write(trailer)
	return err
}

// createTemp creates a staging file in dir, creating dir if needed.
func (s *Store) createTemp(dir string, b *batch) (*os.File, error) {
	for attempt := 1; ; attempt++ {
		if err := s.mkdirAll(dir, b); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(filepath.Join(dir, tempPrefix+randomHex()), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		// A concurrent Delete may prune dir, empty, between mkdirAll and
		// OpenFile: then create it again.
		if err == nil || !errors.Is(err, fs.ErrNotExist) || attempt == createAttempts {
			return f, err
		}
	}
}

// mkdirAll creates dir and its missing parents up to the root, syncing each
// parent (or, in a batch, leaving that to Flush) so that the new entries
// survive a crash.
func (s *Store) mkdirAll(dir string, b *batch) error {
	if dir == s.root {
		return nil
	}
	fi, err := os.Stat(dir)
	switch {
	case err == nil && fi.IsDir():
		return nil
	case err == nil:
		rel, _ := filepath.Rel(s.root, dir)
		return fmt.Errorf("%q is an object, so it cannot also be the directory of other keys in a filesystem store", filepath.ToSlash(rel))
	case !isMissing(err):
		return err
	}
	parent := filepath.Dir(dir)
	if err := s.mkdirAll(parent, b); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if b != nil {
		b.addDirs(parent)
		return nil
	}
	return syncDir(parent)
}

// prune removes dir and its parents below the root while they are empty.
// rmdir fails on a directory that holds anything, an in-flight Put's staging
// file included, so pruning never takes what another writer needs.
func (s *Store) prune(dir string) {
	for dir != s.root && strings.HasPrefix(dir, s.root) {
		if os.Remove(dir) != nil {
			return
		}
		dir = filepath.Dir(dir)
	}
}

// Get implements storage.Store.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, storage.ObjectInfo, error) {
	f, info, err := s.open(ctx, key)
	if err != nil {
		return nil, storage.ObjectInfo{}, storage.OpError(driver, "get", key, err)
	}
	content := struct {
		io.Reader
		io.Closer
	}{io.NewSectionReader(f, 0, info.Size), f}
	return storage.VerifyReader(ctx, content, info), info, nil
}

// Stat implements storage.Store.
func (s *Store) Stat(ctx context.Context, key string) (storage.ObjectInfo, error) {
	f, info, err := s.open(ctx, key)
	if err != nil {
		return storage.ObjectInfo{}, storage.OpError(driver, "stat", key, err)
	}
	f.Close()
	return info, nil
}

// open opens key's file and reads its record.
func (s *Store) open(ctx context.Context, key string) (*os.File, storage.ObjectInfo, error) {
	path, err := s.Path(key)
	if err != nil {
		return nil, storage.ObjectInfo{}, err
	}
	if err := ctx.Err(); err != nil {
		return nil, storage.ObjectInfo{}, err
	}
	f, err := os.Open(path)
	if isMissing(err) {
		return nil, storage.ObjectInfo{}, storage.ErrNotFound
	}
	if err != nil {
		return nil, storage.ObjectInfo{}, err
	}
	info, err := readRecord(f, key)
	if err != nil {
		f.Close()
		return nil, storage.ObjectInfo{}, err
	}
	return f, info, nil
}

// readRecord reads the trailer of an object file.
func readRecord(f *os.File, key string) (storage.ObjectInfo, error) {
	fi, err := f.Stat()
	if err != nil {
		return storage.ObjectInfo{}, err
	}
	if fi.IsDir() {
		return storage.ObjectInfo{}, storage.ErrNotFound
	}
	corrupt := func(problem string) error {
		return fmt.Errorf("%w: %s: unreadable object record: %s", storage.ErrDigestMismatch, f.Name(), problem)
	}
	total := fi.Size()
	if total < int64(footerSize) {
		return storage.ObjectInfo{}, corrupt(fmt.Sprintf("%d bytes, too short for the trailer", total))
	}
	footer := make([]byte, footerSize)
	if _, err := f.ReadAt(footer, total-int64(footerSize)); err != nil {
		return storage.ObjectInfo{}, err
	}
	if string(footer[8:]) != magic {
		return storage.ObjectInfo{}, corrupt(fmt.Sprintf("no %q footer (not written by nerflow?)", magic))
	}
	n := binary.BigEndian.Uint64(footer[:8])
	if n > maxRecord || int64(n) > total-int64(footerSize) {
		return storage.ObjectInfo{}, corrupt(fmt.Sprintf("record length %d does not fit", n))
	}
	js := make([]byte, n)
	start := total - int64(footerSize) - int64(n)
	if _, err := f.ReadAt(js, start); err != nil {
		return storage.ObjectInfo{}, err
	}
	var rec record
	if err := json.Unmarshal(js, &rec); err != nil {
		return storage.ObjectInfo{}, corrupt(err.Error())
	}
	if rec.Size != start {
		return storage.ObjectInfo{}, corrupt(fmt.Sprintf("records %d bytes of content, the file holds %d", rec.Size, start))
	}
	if err := storage.ValidateDigest(rec.Digest); err != nil {
		return storage.ObjectInfo{}, corrupt(err.Error())
	}
	return storage.ObjectInfo{Key: key, Size: rec.Size, Digest: rec.Digest, ModTime: fi.ModTime(), Metadata: rec.Metadata}, nil
}

// List implements storage.Store.
func (s *Store) List(ctx context.Context, prefix string) ([]storage.ObjectInfo, error) {
	infos, err := s.list(ctx, prefix)
	if err != nil {
		return nil, storage.OpError(driver, "list", prefix, err)
	}
	return infos, nil
}

func (s *Store) list(ctx context.Context, prefix string) ([]storage.ObjectInfo, error) {
	if err := storage.ValidatePrefix(prefix); err != nil {
		return nil, err
	}
	// Only the directory part of the prefix names a directory: "a/b" may
	// match "a/bc", so the walk starts at "a".
	start := filepath.Join(s.root, filepath.FromSlash(prefix[:strings.LastIndex(prefix, "/")+1]))
	infos := []storage.ObjectInfo{}
	err := filepath.WalkDir(start, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			// The start is missing or not a directory (no key under
			// it), or a concurrent Delete pruned a directory.
			if isMissing(err) {
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if path == start {
			return nil
		}
		if strings.HasPrefix(d.Name(), storage.ReservedPrefix) {
			return skip(d)
		}
		rel, err := filepath.Rel(s.root, path)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if d.IsDir() {
			if dirKey := key + "/"; !strings.HasPrefix(dirKey, prefix) && !strings.HasPrefix(prefix, dirKey) {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !strings.HasPrefix(key, prefix) {
			return nil
		}
		f, info, err := s.open(ctx, key)
		switch {
		case errors.Is(err, storage.ErrNotFound):
			return nil // deleted since the directory was read
		case err != nil:
			return fmt.Errorf("%q: %w", key, err)
		}
		f.Close()
		infos = append(infos, info)
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(infos, func(a, b storage.ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return infos, nil
}

func skip(d fs.DirEntry) error {
	if d.IsDir() {
		return fs.SkipDir
	}
	return nil
}

// Delete implements storage.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	return storage.OpError(driver, "delete", key, s.delete(ctx, key))
}

func (s *Store) delete(ctx context.Context, key string) error {
	path, err := s.Path(key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	fi, err := os.Lstat(path)
	if isMissing(err) || err == nil && fi.IsDir() {
		return nil // no object under key (a directory is only a prefix)
	}
	if err != nil {
		return err
	}
	if err := os.Remove(path); err != nil && !isMissing(err) {
		return err
	}
	dir := filepath.Dir(path)
	if err := syncDir(dir); err != nil && !isMissing(err) {
		return err
	}
	s.prune(dir)
	return nil
}

// RemoveStale removes staging files older than age: those of Puts whose
// process died before publishing or cleaning up. They are invisible to List
// and Get and only take space. age must exceed the longest Put in progress,
// whose staging file it would otherwise take; an hour is ample. It returns
// how many files it removed.
func (s *Store) RemoveStale(ctx context.Context, age time.Duration) (int, error) {
	cutoff := time.Now().Add(-age)
	removed := 0
	err := filepath.WalkDir(s.root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if isMissing(err) {
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() || !strings.HasPrefix(d.Name(), tempPrefix) {
			return nil
		}
		fi, err := d.Info()
		if err != nil || fi.ModTime().After(cutoff) {
			return nil
		}
		if err := os.Remove(path); err == nil {
			removed++
			s.prune(filepath.Dir(path))
		}
		return nil
	})
	if err != nil {
		return removed, fmt.Errorf("fsstore: removing stale staging files: %w", err)
	}
	return removed, nil
}

// Close implements storage.Store; a filesystem store holds no resources.
func (s *Store) Close() error { return nil }

// isMissing reports whether err says a path does not exist, including the
// case where one of its parents is a file.
func isMissing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// syncDir makes the entries of dir (a rename, a new file) durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return syncFile(d)
}

// syncFile fsyncs an open file or directory.
func syncFile(f *os.File) error {
	if err := f.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		// Some filesystems cannot fsync a directory (EINVAL); there
		// is nothing more to do there.
		return err
	}
	return nil
}

func randomHex() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
