package artifact_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/nerflow/nerflow/storage"
	"github.com/nerflow/nerflow/storage/artifact"
	"github.com/nerflow/nerflow/storage/layout"
)

// Two artifacts with the same large file of an input store its bytes once,
// as the blob of its digest, and their own large files under their
// prefixes; each reads it, the digest of each is that of its content
// (wherever the bytes are), and deleting one leaves the other whole.
func TestPutFileSharesLargeFiles(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	dir := t.TempDir()
	big := make([]byte, artifact.SharedMinSize+10)
	for i := range big {
		big[i] = byte(i * 7)
	}
	vectors := filepath.Join(dir, "vectors.bin")
	small := filepath.Join(dir, "tagger.json")
	if err := os.WriteFile(vectors, big, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(small, []byte(`{"format":2}`), 0o644); err != nil {
		t.Fatal(err)
	}
	// Large too, but no input's: the artifact's own.
	weights := filepath.Join(dir, "weights.pt")
	if err := os.WriteFile(weights, big[1:], 0o644); err != nil {
		t.Fatal(err)
	}
	commit := func(prefix string) artifact.Manifest {
		t.Helper()
		w := artifact.NewWriter(s, prefix, artifact.Manifest{Kind: "checkpoint", Producer: producer})
		w.Share(storage.Digest(big), storage.Digest([]byte("another input")))
		for name, path := range map[string]string{"vectors.bin": vectors, "tagger.json": small, "weights.pt": weights} {
			if _, err := w.PutFile(ctx, name, path); err != nil {
				t.Fatal(err)
			}
		}
		m, err := w.Commit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	a, b := commit("artifacts/k1-x1-model"), commit("artifacts/k2-x1-model")

	blob := layout.Blob(storage.Digest(big))
	for _, m := range []artifact.Manifest{a, b} {
		f, _ := m.File("vectors.bin")
		if !f.Shared() || f.Blob != blob || m.Key("vectors.bin") != blob {
			t.Errorf("%s: vectors.bin is %+v at %s, want the shared blob %s", m.Prefix, f, m.Key("vectors.bin"), blob)
		}
		if f, _ := m.File("tagger.json"); f.Shared() {
			t.Errorf("%s: a small file is shared: %+v", m.Prefix, f)
		}
		if f, _ := m.File("weights.pt"); f.Shared() || m.Key("weights.pt") != m.Prefix+"/weights.pt" {
			t.Errorf("%s: a large file of no input is shared: %+v", m.Prefix, f)
		}
	}
	objs, err := s.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var stored int64
	for _, o := range objs {
		if o.Size == int64(len(big)) {
			stored += o.Size
		}
	}
	if stored != int64(len(big)) {
		t.Errorf("the vectors take %d bytes, want one copy of %d: %v", stored, len(big), objs)
	}

	// The content digest ignores where the bytes are: the same files put
	// under the prefix give the same digest.
	w := artifact.NewWriter(s, "artifacts/k3-x1-model", artifact.Manifest{Kind: "checkpoint", Producer: producer})
	if _, err := w.PutBytes(ctx, "vectors.bin", big); err != nil {
		t.Fatal(err)
	}
	if _, err := w.PutBytes(ctx, "tagger.json", []byte(`{"format":2}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.PutBytes(ctx, "weights.pt", big[1:]); err != nil {
		t.Fatal(err)
	}
	c, err := w.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c.Digest != a.Digest || a.Digest != b.Digest {
		t.Errorf("digests %s %s %s, want one: the content is the same", a.Digest, b.Digest, c.Digest)
	}

	if err := artifact.Delete(ctx, s, a); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Stat(ctx, blob); err != nil {
		t.Errorf("deleting one artifact deleted the shared file: %v", err)
	}
	got, err := artifact.Read(ctx, s, b.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	if err := artifact.Verify(ctx, s, got); err != nil {
		t.Errorf("the other artifact after the delete: %v", err)
	}
	if ok, err := artifact.Stored(ctx, s, got); !ok || err != nil {
		t.Errorf("Stored = %v, %v", ok, err)
	}

	// Once the blob is gone, the artifact is not stored any more.
	if err := s.Delete(ctx, blob); err != nil {
		t.Fatal(err)
	}
	if ok, err := artifact.Stored(ctx, s, got); ok || err != nil {
		t.Errorf("Stored without the blob = %v, %v", ok, err)
	}
	if _, err := artifact.ReadFile(ctx, s, got, "vectors.bin"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("reading without the blob: %v", err)
	}
}

// A manifest whose blob is not the shared file of the file's digest is
// invalid: it would read other bytes than it lists.
func TestBlobMustMatchDigest(t *testing.T) {
	m := artifact.Manifest{Kind: "checkpoint", Prefix: "artifacts/x", Producer: producer,
		Files: []artifact.File{{Name: "v.bin", Size: 1, Digest: storage.Digest([]byte("a")), Blob: layout.Blob(storage.Digest([]byte("b")))}}}
	m.Created = m.Created.Add(1)
	m.Seal()
	if err := m.Validate(); !errors.Is(err, artifact.ErrInvalid) {
		t.Errorf("Validate = %v, want ErrInvalid", err)
	}
	m.Files[0].Blob = layout.Blob(m.Files[0].Digest)
	if err := m.Validate(); err != nil {
		t.Errorf("Validate with the right blob: %v", err)
	}
}
