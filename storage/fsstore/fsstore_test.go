package fsstore_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nerflow/nerflow/storage"
	"github.com/nerflow/nerflow/storage/fsstore"
	"github.com/nerflow/nerflow/storage/storagetest"
)

func newStore(t *testing.T) storage.Store {
	s, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// corrupt flips the first byte of the object's file, which is content.
func corrupt(t *testing.T, s storage.Store, key string) {
	t.Helper()
	path, err := s.(*fsstore.Store).Path(key)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, 0); err != nil {
		t.Fatal(err)
	}
}

func TestConformance(t *testing.T) {
	storagetest.Run(t, storagetest.Harness{New: newStore, Corrupt: corrupt})
}

func TestOpenURL(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	abs, err := storage.Open(ctx, "file://"+dir+"/abs")
	if err != nil {
		t.Fatal(err)
	}
	if got := abs.(*fsstore.Store).Root(); got != dir+"/abs" {
		t.Errorf("file://%s/abs opened %s", dir, got)
	}

	t.Chdir(dir)
	rel, err := storage.Open(ctx, "file://.nerflow/store")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rel.(*fsstore.Store).Root(), filepath.Join(dir, ".nerflow", "store"); got != want {
		t.Errorf("file://.nerflow/store opened %s, want %s", got, want)
	}
	if _, err := os.Stat(filepath.Join(dir, ".nerflow", "store")); err != nil {
		t.Errorf("Open did not create the directory: %v", err)
	}
	if _, err := storage.Open(ctx, "file://"); err == nil {
		t.Error("file:// with no directory opened")
	}
}

// TestLayout pins the on-disk format: the content first, then the trailer.
func TestLayout(t *testing.T) {
	s, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("Peter Blackburn\n")
	if _, err := storage.PutBytes(context.Background(), s, "a/b.txt", data, storage.WithMetadata("lang", "en")); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(s.Root(), "a", "b.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := string(data) + trailer(`{"digest":"`+storage.Digest(data)+`","size":16,"metadata":{"lang":"en"}}`)
	if string(raw) != want {
		t.Errorf("file holds\n%q\nwant\n%q", raw, want)
	}
}

func TestKeyAndPrefixConflict(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	if _, err := storage.PutBytes(ctx, s, "a/b", []byte("x")); err != nil {
		t.Fatal(err)
	}
	_, err := storage.PutBytes(ctx, s, "a/b/c", []byte("y"))
	if err == nil || !strings.Contains(err.Error(), `"a/b" is an object`) {
		t.Errorf("Put under an object: %v, want a conflict error naming a/b", err)
	}
	if _, err := storage.PutBytes(ctx, s, "d/e/f", []byte("x")); err != nil {
		t.Fatal(err)
	}
	_, err = storage.PutBytes(ctx, s, "d/e", []byte("y"))
	if err == nil || !strings.Contains(err.Error(), "directory of other keys") {
		t.Errorf("Put over a directory: %v, want a conflict error", err)
	}
	if got, _, err := storage.GetBytes(ctx, s, "a/b"); err != nil || string(got) != "x" {
		t.Errorf("a/b after the conflict: %q, %v", got, err)
	}
	assertNoStaging(t, s.(*fsstore.Store).Root())
}

// TestNoLeftovers checks that failed Puts remove their staging files and
// that Delete removes the directories it empties.
func TestNoLeftovers(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	root := s.(*fsstore.Store).Root()
	broken := errors.New("broken")
	if _, err := s.Put(ctx, "x/y/z", io.MultiReader(strings.NewReader("abc"), errReader{broken})); !errors.Is(err, broken) {
		t.Fatalf("Put from a failing reader: %v", err)
	}
	assertNoStaging(t, root)
	assertEmpty(t, root)

	if _, err := storage.PutBytes(ctx, s, "x/y/z", []byte("abc")); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "x/y/z"); err != nil {
		t.Fatal(err)
	}
	assertEmpty(t, root)
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// TestReaderKeepsItsVersion checks that a reader that opened an object
// reads that version to the end, verified, while a Put replaces it.
func TestReaderKeepsItsVersion(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	v1, v2 := storagetest.Data(1, 500_000), storagetest.Data(2, 400_000)
	if _, err := storage.PutBytes(ctx, s, "k", v1); err != nil {
		t.Fatal(err)
	}
	rc, _, err := s.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	head := make([]byte, 1000)
	if _, err := io.ReadFull(rc, head); err != nil {
		t.Fatal(err)
	}
	if _, err := storage.PutBytes(ctx, s, "k", v2); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("reading the old version after an overwrite: %v", err)
	}
	if !bytes.Equal(append(head, rest...), v1) {
		t.Error("the open reader switched versions")
	}
}

func TestDamagedRecord(t *testing.T) {
	ctx := context.Background()
	s, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := storage.PutBytes(ctx, s, "ok", []byte("fine")); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		"foreign":   "a file someone dropped into the store",
		"short":     "tiny",
		"overlong":  "content" + `{"digest":"sha256:00","size":7}` + "\x00\x00\x00\x00\x00\x00\x00\x99nerflow1",
		"badjson":   "content" + trailer(`{"digest":`),
		"baddigest": "content" + trailer(`{"digest":"sha256:00","size":7}`),
		"badsize":   "content" + trailer(`{"digest":"`+storage.Digest([]byte("content"))+`","size":8}`),
	} {
		if err := os.WriteFile(filepath.Join(s.Root(), name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Stat(ctx, name); !errors.Is(err, storage.ErrDigestMismatch) {
			t.Errorf("Stat of %s: %v, want ErrDigestMismatch", name, err)
		}
		if _, _, err := s.Get(ctx, name); !errors.Is(err, storage.ErrDigestMismatch) {
			t.Errorf("Get of %s: %v, want ErrDigestMismatch", name, err)
		}
		_, err := s.List(ctx, name)
		if !errors.Is(err, storage.ErrDigestMismatch) || !strings.Contains(err.Error(), name) {
			t.Errorf("List over %s: %v, want ErrDigestMismatch naming the file", name, err)
		}
	}
	if got, _, err := storage.GetBytes(ctx, s, "ok"); err != nil || string(got) != "fine" {
		t.Errorf("intact object: %q, %v", got, err)
	}
}

// trailer is the end of an object file whose record is js.
func trailer(js string) string {
	return js + string(binary.BigEndian.AppendUint64(nil, uint64(len(js)))) + "nerflow1"
}

func assertNoStaging(t *testing.T, root string) {
	t.Helper()
	filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), storage.ReservedPrefix) {
			t.Errorf("staging file left behind: %s", path)
		}
		return err
	})
}

func assertEmpty(t *testing.T, root string) {
	t.Helper()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("left in the store directory: %s", e.Name())
	}
}

// BenchmarkFS compares the store with plain durable file writes (write,
// fsync, close) and plain reads of the same files.
func BenchmarkFS(b *testing.B) {
	s, err := fsstore.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	refDir := b.TempDir()
	ref := storagetest.Reference{
		Put: func(_ context.Context, key string, data []byte) error {
			path := filepath.Join(refDir, filepath.FromSlash(key))
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return err
			}
			f, err := os.Create(path)
			if err != nil {
				return err
			}
			if _, err := f.Write(data); err != nil {
				f.Close()
				return err
			}
			if err := f.Sync(); err != nil {
				f.Close()
				return err
			}
			return f.Close()
		},
		Get: func(_ context.Context, key string, buf *bytes.Buffer) error {
			f, err := os.Open(filepath.Join(refDir, filepath.FromSlash(key)))
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = buf.ReadFrom(f)
			return err
		},
	}
	storagetest.Bench(b, s, ref, 8<<20)
}

func TestRemoveStale(t *testing.T) {
	ctx := context.Background()
	s, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := storage.PutBytes(ctx, s, "a/keep", []byte("x")); err != nil {
		t.Fatal(err)
	}
	// What a Put killed mid-stream leaves: a staging file, in its own
	// directory here, and a recent one that may belong to a live Put.
	stale := filepath.Join(s.Root(), "b", "c", ".nerflow-tmp-dead")
	fresh := filepath.Join(s.Root(), "a", ".nerflow-tmp-live")
	for _, p := range []string{stale, fresh} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	n, err := s.RemoveStale(ctx, time.Hour)
	if err != nil || n != 1 {
		t.Fatalf("RemoveStale = %d, %v; want 1 file removed", n, err)
	}
	if _, err := os.Stat(filepath.Join(s.Root(), "b")); !os.IsNotExist(err) {
		t.Errorf("the emptied directories remain: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("a recent staging file was removed: %v", err)
	}
	if got, _, err := storage.GetBytes(ctx, s, "a/keep"); err != nil || string(got) != "x" {
		t.Errorf("object after RemoveStale: %q, %v", got, err)
	}
}
