package artifact_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nerflow/nerflow/storage"
	"github.com/nerflow/nerflow/storage/artifact"
	"github.com/nerflow/nerflow/storage/fsstore"
)

func newStore(t *testing.T) storage.Store {
	s, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var producer = artifact.Producer{Stage: "distant.label", Version: 2, NodeKey: "ab12", Run: "r1"}

func TestWriterCommitRead(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	gaz := storage.Digest([]byte("a gazetteer"))
	w := artifact.NewWriter(s, "nodes/ab12/out", artifact.Manifest{
		Kind: "corpus", SchemaVersion: 1, Producer: producer,
		Lineage: []artifact.Input{{Name: "gazetteer", Digest: gaz}},
	})
	w.SetMeta("sentences", "2")
	train := []byte("EU B-ORG\nrejects O\n")
	if _, err := w.PutBytes(ctx, "train.txt", train); err != nil {
		t.Fatal(err)
	}
	if _, err := w.PutJSON(ctx, "stats/types.json", map[string]int{"ORG": 1}); err != nil {
		t.Fatal(err)
	}
	if ok, err := artifact.Exists(ctx, s, "nodes/ab12/out"); ok || err != nil {
		t.Fatalf("Exists before Commit = %v, %v; want false: the manifest makes the artifact", ok, err)
	}
	before := time.Now().UTC()
	a, err := w.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := artifact.Exists(ctx, s, "nodes/ab12/out"); !ok || err != nil {
		t.Fatalf("Exists after Commit = %v, %v", ok, err)
	}
	if _, err := s.Stat(ctx, "nodes/ab12/out.manifest.json"); err != nil {
		t.Errorf("the manifest is not beside the files: %v", err)
	}

	// The digest is that of the content, spelled out here by hand.
	types := "{\n  \"ORG\": 1\n}\n"
	content := `{"kind":"corpus","schema_version":1,"meta":{"sentences":"2"},"files":[` +
		`{"name":"stats/types.json","size":15,"digest":"` + storage.Digest([]byte(types)) + `"},` +
		`{"name":"train.txt","size":19,"digest":"` + storage.Digest(train) + `"}]}`
	if a.Digest != storage.Digest([]byte(content)) {
		t.Errorf("digest %s, want the digest of %s", a.Digest, content)
	}

	got, err := artifact.Read(ctx, s, "nodes/ab12/out")
	if err != nil {
		t.Fatal(err)
	}
	if got.Digest != a.Digest || got.Kind != "corpus" || got.SchemaVersion != 1 || got.Producer != producer ||
		len(got.Lineage) != 1 || got.Lineage[0].Digest != gaz || got.Meta["sentences"] != "2" ||
		got.Format != artifact.FormatVersion || got.Prefix != "nodes/ab12/out" {
		t.Errorf("Read = %+v, want what was committed: %+v", got, a)
	}
	if got.Created.Before(before.Add(-time.Second)) || got.Created.After(time.Now().Add(time.Second)) {
		t.Errorf("Created %v is not the commit time", got.Created)
	}
	wantFiles := []artifact.File{
		{Name: "stats/types.json", Size: int64(len(types)), Digest: storage.Digest([]byte(types))},
		{Name: "train.txt", Size: int64(len(train)), Digest: storage.Digest(train)},
	}
	if len(got.Files) != 2 || got.Files[0] != wantFiles[0] || got.Files[1] != wantFiles[1] {
		t.Errorf("Files = %+v, want %+v", got.Files, wantFiles)
	}
	if got.Size() != int64(len(types)+len(train)) {
		t.Errorf("Size = %d", got.Size())
	}
	b, err := artifact.ReadFile(ctx, s, got, "train.txt")
	if err != nil || !bytes.Equal(b, train) {
		t.Errorf("ReadFile = %q, %v", b, err)
	}
	if err := artifact.Verify(ctx, s, got); err != nil {
		t.Errorf("Verify: %v", err)
	}
	_, err = artifact.Open(ctx, s, got, "missing.txt")
	if !errors.Is(err, storage.ErrNotFound) || !strings.Contains(err.Error(), "has: stats/types.json, train.txt") {
		t.Errorf("Open of an unlisted file: %v, want ErrNotFound naming the files there are", err)
	}
}

// The digest identifies the content only: where, when, by whom and from what
// it was made does not change it, so a node downstream of a re-executed one
// hits the cache.
func TestDigestIsContent(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	commit := func(prefix string, m artifact.Manifest, data string) artifact.Manifest {
		t.Helper()
		w := artifact.NewWriter(s, prefix, m)
		if _, err := w.PutBytes(ctx, "f.txt", []byte(data)); err != nil {
			t.Fatal(err)
		}
		a, err := w.Commit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	base := artifact.Manifest{Kind: "corpus", Producer: producer, Meta: map[string]string{"scheme": "bio"}}
	a := commit("a", base, "x")

	other := base
	other.Producer = artifact.Producer{Stage: "other", Version: 7, NodeKey: "cd34", Run: "r2"}
	other.Lineage = []artifact.Input{{Name: "in", Digest: a.Digest}}
	other.Created = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	if b := commit("b", other, "x"); b.Digest != a.Digest {
		t.Errorf("same content made elsewhere, otherwise: digest %s, want %s", b.Digest, a.Digest)
	}
	for name, m := range map[string]artifact.Manifest{
		"kind":   {Kind: "report", Producer: producer, Meta: base.Meta},
		"schema": {Kind: "corpus", SchemaVersion: 2, Producer: producer, Meta: base.Meta},
		"meta":   {Kind: "corpus", Producer: producer, Meta: map[string]string{"scheme": "io"}},
	} {
		if c := commit("c-"+name, m, "x"); c.Digest == a.Digest {
			t.Errorf("another %s has the same digest", name)
		}
	}
	if c := commit("d", base, "y"); c.Digest == a.Digest {
		t.Error("other bytes have the same digest")
	}

	// No metadata round-trips through JSON (which drops an empty map) to a
	// valid manifest.
	empty := commit("e", artifact.Manifest{Kind: "corpus", Producer: producer, Meta: map[string]string{}}, "x")
	b, _ := json.Marshal(empty)
	var back artifact.Manifest
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if err := back.Validate(); err != nil {
		t.Errorf("round trip of empty metadata: %v", err)
	}
}

func TestReplacedFileIsDetected(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	w := artifact.NewWriter(s, "p", artifact.Manifest{Kind: "metrics", Producer: producer})
	if _, err := w.PutBytes(ctx, "report.json", []byte(`{"f1":0.9}`)); err != nil {
		t.Fatal(err)
	}
	a, err := w.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Another producer overwrites the file after the manifest was written.
	if _, err := storage.PutBytes(ctx, s, "p/report.json", []byte(`{"f1":0.1}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := artifact.ReadFile(ctx, s, a, "report.json"); !errors.Is(err, storage.ErrDigestMismatch) {
		t.Errorf("ReadFile of a replaced file: %v, want ErrDigestMismatch", err)
	}
	if err := artifact.Verify(ctx, s, a); !errors.Is(err, storage.ErrDigestMismatch) {
		t.Errorf("Verify: %v, want ErrDigestMismatch", err)
	}
}

// Finish seals like Commit but leaves the manifest to its caller; Stored
// tells from the files alone whether the artifact is still there.
func TestFinishAndStored(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	w := artifact.NewWriter(s, "k/a1/out", artifact.Manifest{Kind: "corpus", Producer: producer})
	if _, err := w.PutBytes(ctx, "train.txt", []byte("EU B-ORG\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.PutBytes(ctx, "dev.txt", []byte("UN B-ORG\n")); err != nil {
		t.Fatal(err)
	}
	a, err := w.Finish(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Validate(); err != nil || a.Prefix != "k/a1/out" || len(a.Files) != 2 || a.Files[0].Name != "dev.txt" {
		t.Errorf("Finish = %+v (%v), want a sealed manifest of both files", a, err)
	}
	if ok, err := artifact.Exists(ctx, s, "k/a1/out"); ok || err != nil {
		t.Errorf("Exists after Finish = %v, %v; want no manifest stored", ok, err)
	}
	if _, err := w.Finish(ctx); err == nil {
		t.Error("a second Finish was accepted")
	}
	if ok, err := artifact.Stored(ctx, s, a); !ok || err != nil {
		t.Errorf("Stored = %v, %v; want true", ok, err)
	}
	// Replaced: the stored digest is not the listed one.
	if _, err := storage.PutBytes(ctx, s, "k/a1/out/dev.txt", []byte("UN B-LOC\n")); err != nil {
		t.Fatal(err)
	}
	if ok, err := artifact.Stored(ctx, s, a); ok || err != nil {
		t.Errorf("Stored with a replaced file = %v, %v; want false", ok, err)
	}
	// Gone.
	if err := s.Delete(ctx, "k/a1/out/dev.txt"); err != nil {
		t.Fatal(err)
	}
	if ok, err := artifact.Stored(ctx, s, a); ok || err != nil {
		t.Errorf("Stored with a deleted file = %v, %v; want false", ok, err)
	}
}

func TestWriteChecksListedFiles(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	data := []byte("vectors")
	if _, err := storage.PutBytes(ctx, s, "e/vec.bin", data); err != nil {
		t.Fatal(err)
	}
	m := artifact.Manifest{Kind: "embeddings", Producer: producer}
	m.Files = []artifact.File{{Name: "vec.bin", Size: 7, Digest: storage.Digest([]byte("other"))}}
	if _, err := artifact.Write(ctx, s, "e", m); !errors.Is(err, storage.ErrDigestMismatch) {
		t.Errorf("Write listing a wrong digest: %v, want ErrDigestMismatch", err)
	}
	m.Files = []artifact.File{{Name: "absent.bin", Size: 7, Digest: storage.Digest(data)}}
	if _, err := artifact.Write(ctx, s, "e", m); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("Write listing a missing file: %v, want ErrNotFound", err)
	}
	if ok, _ := artifact.Exists(ctx, s, "e"); ok {
		t.Error("a failed Write published a manifest")
	}
	m.Files = []artifact.File{{Name: "vec.bin", Size: 7, Digest: storage.Digest(data)}}
	if _, err := artifact.Write(ctx, s, "e", m); err != nil {
		t.Errorf("Write of a correct manifest: %v", err)
	}
	m.Kind = "Embeddings"
	if _, err := artifact.Write(ctx, s, "e", m); !errors.Is(err, artifact.ErrInvalid) || !strings.Contains(err.Error(), `kind "Embeddings"`) {
		t.Errorf("Write of a bad kind: %v, want ErrInvalid", err)
	}
}

func TestWriterMisuse(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	w := artifact.NewWriter(s, "w", artifact.Manifest{Kind: "corpus", Producer: producer})
	if _, err := w.PutBytes(ctx, "a.txt", []byte("x")); err != nil {
		t.Fatal(err)
	}
	// The manifest lives beside the files: no file name is reserved.
	if _, err := w.PutBytes(ctx, "manifest.json", []byte("{}")); err != nil {
		t.Errorf("a file named manifest.json: %v", err)
	}
	for name, problem := range map[string]string{
		"a.txt":     "written twice",
		"../escape": "invalid key",
		"/abs":      "absolute path",
	} {
		if _, err := w.PutBytes(ctx, name, []byte("y")); err == nil || !strings.Contains(err.Error(), problem) {
			t.Errorf("PutBytes(%q) = %v, want an error saying %q", name, err, problem)
		}
	}
	a, err := w.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Files) != 2 || w.Files() != 2 {
		t.Errorf("files %+v, want a.txt and manifest.json", a.Files)
	}
	if _, err := w.PutBytes(ctx, "late.txt", []byte("z")); err == nil {
		t.Error("Put after Commit succeeded")
	}
	if _, err := w.Commit(ctx); err == nil {
		t.Error("second Commit succeeded")
	}
}

func TestReadRejectsBadManifests(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	d := storage.Digest([]byte("x"))
	valid := artifact.Manifest{Kind: "corpus", Prefix: "bad", Producer: producer, Created: time.Now().UTC(),
		Files: []artifact.File{{Name: "a", Size: 1, Digest: d}, {Name: "b", Size: 1, Digest: d}}}
	valid.Seal()
	if err := valid.Validate(); err != nil {
		t.Fatalf("the valid manifest: %v", err)
	}
	cases := map[string]func(m *artifact.Manifest){
		"format 1: this program reads format 2 only": func(m *artifact.Manifest) { m.Format = 1 },
		"no format version":                          func(m *artifact.Manifest) { m.Format = 0 },
		`kind "Corpus"`:                              func(m *artifact.Manifest) { m.Kind = "Corpus"; m.Digest = m.ContentDigest() },
		"does not match the content":                 func(m *artifact.Manifest) { m.Meta = map[string]string{"f1": "0.99"} },
		`digest "sha256:1"`:                          func(m *artifact.Manifest) { m.Digest = "sha256:1" },
		"producer: neither a stage nor a source":     func(m *artifact.Manifest) { m.Producer = artifact.Producer{} },
		"no created time":                            func(m *artifact.Manifest) { m.Created = time.Time{} },
		"no files":                                   func(m *artifact.Manifest) { m.Files = nil; m.Digest = m.ContentDigest() },
		`describes the files under "elsewhere"`:      func(m *artifact.Manifest) { m.Prefix = "elsewhere" },
		`files[1]: "a" is not sorted`: func(m *artifact.Manifest) {
			m.Files[0], m.Files[1] = m.Files[1], m.Files[0]
			m.Digest = m.ContentDigest()
		},
		"files[0] (a): digest": func(m *artifact.Manifest) { m.Files[0].Digest = "sha256:zz"; m.Digest = m.ContentDigest() },
		"files[0]: file name":  func(m *artifact.Manifest) { m.Files[0].Name = "../a"; m.Digest = m.ContentDigest() },
		"lineage[0] (gazetteer)": func(m *artifact.Manifest) {
			m.Lineage = []artifact.Input{{Name: "gazetteer", Digest: "nope"}}
		},
	}
	check := func(body []byte, problem string) {
		t.Helper()
		if _, err := storage.PutBytes(ctx, s, "bad.manifest.json", body); err != nil {
			t.Fatal(err)
		}
		_, err := artifact.Read(ctx, s, "bad")
		if err == nil || !strings.Contains(err.Error(), problem) || !strings.Contains(err.Error(), "bad.manifest.json") {
			t.Errorf("Read of %s: %v, want an error naming the manifest and saying %q", body, err, problem)
		}
	}
	for problem, spoil := range cases {
		m := valid
		m.Files = append([]artifact.File(nil), valid.Files...)
		spoil(&m)
		b, _ := json.Marshal(m)
		check(b, problem)
	}
	check([]byte(`{"format":2,"files":{}}`), "line 1, column")
	if _, err := artifact.Read(ctx, s, "none"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("Read without a manifest: %v, want ErrNotFound", err)
	}
}

// countingStore counts the objects put into a real store.
type countingStore struct {
	storage.Store
	puts atomic.Int64
}

func (c *countingStore) Put(ctx context.Context, key string, r io.Reader, opts ...storage.PutOption) (storage.ObjectInfo, error) {
	c.puts.Add(1)
	return c.Store.Put(ctx, key, r, opts...)
}

func TestImport(t *testing.T) {
	ctx := context.Background()
	s := &countingStore{Store: newStore(t)}
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "sub"), 0o755)
	os.WriteFile(filepath.Join(dir, "train.txt"), []byte("EU B-ORG\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "sub", "dev.txt"), []byte("UN B-ORG\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(`{"the dataset's own":1}`), 0o644)

	a, err := artifact.Import(ctx, s, "datasets", dir, "corpus")
	if err != nil {
		t.Fatal(err)
	}
	if a.Prefix != "datasets/"+strings.TrimPrefix(a.Digest, "sha256:") || a.Producer.Source != dir || a.Kind != "corpus" {
		t.Errorf("imported %+v", a)
	}
	if len(a.Files) != 3 || a.Files[0].Name != "manifest.json" || a.Files[1].Name != "sub/dev.txt" || a.Files[2].Name != "train.txt" {
		t.Errorf("files %+v", a.Files)
	}
	if s.puts.Load() != 4 { // three files, then the manifest
		t.Errorf("%d puts, want 4", s.puts.Load())
	}
	read, err := artifact.Read(ctx, s, a.Prefix)
	if err != nil || read.Digest != a.Digest {
		t.Fatalf("Read of the import: %+v, %v", read, err)
	}
	if b, err := artifact.ReadFile(ctx, s, read, "sub/dev.txt"); err != nil || string(b) != "UN B-ORG\n" {
		t.Errorf("sub/dev.txt = %q, %v", b, err)
	}

	// Imported again, from another path: nothing but the manifest is put.
	moved := filepath.Join(t.TempDir(), "moved")
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	s.puts.Store(0)
	again, err := artifact.Import(ctx, s, "datasets", moved, "corpus")
	if err != nil || again.Digest != a.Digest || again.Prefix != a.Prefix || again.Producer.Source != moved {
		t.Fatalf("second import: %+v, %v", again, err)
	}
	if s.puts.Load() != 1 {
		t.Errorf("second import put %d objects, want only the manifest", s.puts.Load())
	}

	one := filepath.Join(t.TempDir(), "gaz.txt")
	os.WriteFile(one, []byte("Paris\tLOC\n"), 0o644)
	g, err := artifact.Import(ctx, s, "datasets", one, "")
	if err != nil || len(g.Files) != 1 || g.Files[0].Name != "gaz.txt" || g.Kind != "" {
		t.Errorf("import of one file: %+v, %v", g, err)
	}
	if _, err := artifact.Import(ctx, s, "datasets", t.TempDir(), ""); err == nil || !strings.Contains(err.Error(), "holds no files") {
		t.Errorf("import of an empty directory: %v", err)
	}
	if _, err := artifact.Import(ctx, s, "datasets", filepath.Join(dir, "gone"), ""); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("import of a missing path: %v", err)
	}
}

func TestDelete(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	w := artifact.NewWriter(s, "ck/3", artifact.Manifest{Kind: "checkpoint", Producer: producer})
	w.PutBytes(ctx, "a.bin", []byte{1})
	w.PutBytes(ctx, "sub/b.bin", []byte{2})
	a, err := w.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := artifact.Delete(ctx, s, a); err != nil {
		t.Fatal(err)
	}
	if objs, _ := s.List(ctx, "ck"); len(objs) != 0 {
		t.Errorf("left %+v", objs)
	}
}

func TestCreate(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	w := artifact.NewWriter(s, "c", artifact.Manifest{Kind: "predictions", Producer: producer})
	f, err := w.Create(ctx, "pred.txt")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Create(ctx, "pred.txt"); err == nil || !strings.Contains(err.Error(), "written twice") {
		t.Errorf("second Create of one name: %v", err)
	}
	io.WriteString(f, "B-PER\n")
	io.WriteString(f, "O\n")
	open, err := w.Create(ctx, "forgotten.txt")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(ctx); !errors.Is(err, artifact.ErrNotClosed) || !strings.Contains(err.Error(), "forgotten.txt") {
		t.Errorf("Commit with a file open: %v, want ErrNotClosed naming it", err)
	}
	// The aborted file's writer fails, and it is not part of the artifact.
	if _, err := io.WriteString(open, "x"); err == nil {
		t.Error("writing to a file aborted by Commit succeeded")
	}
	if err := open.Close(); !errors.Is(err, artifact.ErrNotClosed) {
		t.Errorf("Close of the aborted file: %v", err)
	}
	a, err := w.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Files) != 1 {
		t.Fatalf("files %+v, want pred.txt alone", a.Files)
	}
	if b, err := artifact.ReadFile(ctx, s, a, "pred.txt"); err != nil || string(b) != "B-PER\nO\n" {
		t.Errorf("pred.txt = %q, %v", b, err)
	}
	if _, err := s.Stat(ctx, "c/forgotten.txt"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("the aborted file was stored: %v", err)
	}
}
