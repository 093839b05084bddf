package artifact_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
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

var producer = artifact.Producer{Stage: "distant-labels", Version: 2, Node: "ab12", Run: "r1"}

func TestWriterCommitRead(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	gaz := storage.Digest([]byte("a gazetteer manifest"))
	w := artifact.NewWriter(s, "nodes/ab12/out", artifact.Manifest{
		Kind: "corpus", SchemaVersion: 1, Producer: producer,
		Lineage:  []artifact.Input{{Name: "gazetteer", Digest: gaz}},
		Metadata: map[string]string{"sentences": "2"},
	})
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
	manifest, _, err := storage.GetBytes(ctx, s, "nodes/ab12/out/manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	if a.Digest != storage.Digest(manifest) {
		t.Errorf("artifact digest %s, want the manifest's %s", a.Digest, storage.Digest(manifest))
	}

	got, err := artifact.Read(ctx, s, "nodes/ab12/out")
	if err != nil {
		t.Fatal(err)
	}
	if got.Digest != a.Digest || got.Kind != "corpus" || got.SchemaVersion != 1 || got.Producer != producer ||
		len(got.Lineage) != 1 || got.Lineage[0].Digest != gaz || got.Metadata["sentences"] != "2" || got.Format != 1 {
		t.Errorf("Read = %+v, want what was committed: %+v", got, a)
	}
	if got.Created.Before(before.Add(-time.Second)) || got.Created.After(time.Now().Add(time.Second)) {
		t.Errorf("Created %v is not the commit time", got.Created)
	}
	wantFiles := []artifact.File{
		{Name: "stats/types.json", Size: int64(len("{\n  \"ORG\": 1\n}\n")), Digest: storage.Digest([]byte("{\n  \"ORG\": 1\n}\n"))},
		{Name: "train.txt", Size: int64(len(train)), Digest: storage.Digest(train)},
	}
	if len(got.Files) != 2 || got.Files[0] != wantFiles[0] || got.Files[1] != wantFiles[1] {
		t.Errorf("Files = %+v, want %+v", got.Files, wantFiles)
	}
	b, err := artifact.ReadFile(ctx, s, got, "train.txt")
	if err != nil || !bytes.Equal(b, train) {
		t.Errorf("ReadFile = %q, %v", b, err)
	}
	if err := artifact.Verify(ctx, s, got); err != nil {
		t.Errorf("Verify: %v", err)
	}
	if _, err := artifact.Open(ctx, s, got, "missing.txt"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("Open of an unlisted file: %v, want ErrNotFound", err)
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
}

func TestWriterMisuse(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	w := artifact.NewWriter(s, "w", artifact.Manifest{Kind: "corpus", Producer: producer})
	if _, err := w.PutBytes(ctx, "a.txt", []byte("x")); err != nil {
		t.Fatal(err)
	}
	for name, problem := range map[string]string{
		"a.txt":         "written twice",
		"manifest.json": "reserved",
		"../escape":     "invalid key",
	} {
		if _, err := w.PutBytes(ctx, name, []byte("y")); err == nil || !strings.Contains(err.Error(), problem) {
			t.Errorf("PutBytes(%q) = %v, want an error saying %q", name, err, problem)
		}
	}
	if _, err := w.Commit(ctx); err != nil {
		t.Fatal(err)
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
	const head = `"kind":"corpus","producer":{"stage":"s","version":1},"created":"2026-11-25T10:00:00Z"`
	for body, problem := range map[string]string{
		`{"format":2,` + head + `}`: "format 2 is newer",
		`{"format":1,"kind":"Corpus","producer":{"stage":"s"},"created":"2026-11-25T10:00:00Z"}`:                                    `kind "Corpus"`,
		`{"format":1,"kind":"corpus","producer":{},"created":"2026-11-25T10:00:00Z"}`:                                               "producer: no stage",
		`{"format":1,"kind":"corpus","producer":{"stage":"s"}}`:                                                                     "no created time",
		`{"format":1,` + head + `,"files":[{"name":"b","size":1,"digest":"` + d + `"},{"name":"a","size":1,"digest":"` + d + `"}]}`: `files[1]: "a" is not sorted`,
		`{"format":1,` + head + `,"files":[{"name":"a","size":1,"digest":"sha256:zz"}]}`:                                            "files[0] (a): digest",
		`{"format":1,` + head + `,"files":[{"name":"../a","size":1,"digest":"` + d + `"}]}`:                                         "files[0]: file name",
		`{"format":1,` + head + `,"lineage":[{"name":"gazetteer","digest":"nope"}]}`:                                                "lineage[0] (gazetteer)",
		`{"format":1,` + head + `,"files":{}}`:                                                                                      "line 1, column",
	} {
		if _, err := storage.PutBytes(ctx, s, "bad/manifest.json", []byte(body)); err != nil {
			t.Fatal(err)
		}
		_, err := artifact.Read(ctx, s, "bad")
		if err == nil || !strings.Contains(err.Error(), problem) || !strings.Contains(err.Error(), "bad/manifest.json") {
			t.Errorf("Read of %s: %v, want an error naming the manifest and saying %q", body, err, problem)
		}
	}
	if _, err := artifact.Read(ctx, s, "none"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("Read without a manifest: %v, want ErrNotFound", err)
	}
}
