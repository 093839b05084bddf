package artifact_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/internal/testenv"
	"github.com/nerflow/nerflow/storage"
	"github.com/nerflow/nerflow/storage/artifact"
	"github.com/nerflow/nerflow/storage/fsstore"
	_ "github.com/nerflow/nerflow/storage/s3store"
)

func TestImportSourceFromStore(t *testing.T) {
	cfg := testenv.S3(t)
	ctx := context.Background()
	var b [4]byte
	_, _ = rand.Read(b[:])
	bucket := "nfimport-" + hex.EncodeToString(b[:])
	q := "?endpoint=" + cfg.Endpoint + "&access_key=" + cfg.AccessKey + "&secret_key=" + cfg.SecretKey + "&secure=false"
	src, err := storage.Open(ctx, "s3://"+bucket+q)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for key, text := range map[string]string{"corpus/train.txt": "one", "dir/a.txt": "a", "dir/sub/b.txt": "b"} {
		if _, err := storage.PutBytes(ctx, src, key, []byte(text)); err != nil {
			t.Fatal(err)
		}
	}
	dst, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}

	one, err := artifact.ImportSource(ctx, dst, "datasets", "s3://"+bucket+"/corpus/train.txt"+q, "text")
	if err != nil {
		t.Fatal(err)
	}
	if len(one.Files) != 1 || one.Files[0].Name != "train.txt" || one.Kind != "text" {
		t.Fatalf("one object: %+v", one)
	}
	if strings.Contains(one.Producer.Source, cfg.SecretKey) {
		t.Errorf("the source keeps the secret: %s", one.Producer.Source)
	}
	if got, err := artifact.ReadFile(ctx, dst, one, "train.txt"); err != nil || string(got) != "one" {
		t.Errorf("train.txt: %q, %v", got, err)
	}
	if one.Prefix != "datasets/"+strings.TrimPrefix(one.Digest, "sha256:") {
		t.Errorf("prefix %s for digest %s", one.Prefix, one.Digest)
	}

	dir, err := artifact.ImportSource(ctx, dst, "datasets", "s3://"+bucket+"/dir"+q, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(dir.Files) != 2 || dir.Files[0].Name != "a.txt" || dir.Files[1].Name != "sub/b.txt" {
		t.Fatalf("prefix: %+v", dir.Files)
	}
	if err := artifact.Verify(ctx, dst, dir); err != nil {
		t.Fatal(err)
	}
	// Imported again: the files are there already and are not copied.
	before, _ := dst.Stat(ctx, dir.Key("a.txt"))
	again, err := artifact.ImportSource(ctx, dst, "datasets", "s3://"+bucket+"/dir"+q, "")
	if err != nil || again.Digest != dir.Digest {
		t.Fatalf("again: %v, %s vs %s", err, again.Digest, dir.Digest)
	}
	if after, _ := dst.Stat(ctx, dir.Key("a.txt")); !after.ModTime.Equal(before.ModTime) {
		t.Error("a file already imported was copied again")
	}

	if _, err := artifact.ImportSource(ctx, dst, "datasets", "s3://"+bucket+"/nothing"+q, ""); err == nil || !strings.Contains(err.Error(), `no object or prefix "nothing"`) {
		t.Errorf("missing prefix: %v", err)
	}
}

func TestImportSourceLocal(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p := filepath.Join(dir, "train.txt")
	if err := os.WriteFile(p, []byte("local"), 0o644); err != nil {
		t.Fatal(err)
	}
	dst, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	byPath, err := artifact.ImportSource(ctx, dst, "datasets", p, "")
	if err != nil {
		t.Fatal(err)
	}
	byURL, err := artifact.ImportSource(ctx, dst, "datasets", "file://"+p, "")
	if err != nil {
		t.Fatal(err)
	}
	if byPath.Digest != byURL.Digest || byPath.Files[0].Name != "train.txt" {
		t.Errorf("path %+v, URL %+v", byPath, byURL)
	}
	if _, err := artifact.ImportSource(ctx, dst, "datasets", filepath.Join(dir, "missing.txt"), ""); err == nil || !strings.Contains(err.Error(), "missing.txt") {
		t.Errorf("missing file: %v", err)
	}
}

// A directory reached through links imports every file it holds: the
// linked directory itself, and a linked file inside it, under the link's
// name. A link inside to a directory, or to nothing, is an error that
// names it, not a file silently left out.
func TestImportFollowsLinks(t *testing.T) {
	ctx := context.Background()
	data, elsewhere, project := t.TempDir(), t.TempDir(), t.TempDir()
	for p, text := range map[string]string{filepath.Join(data, "train.txt"): "train", filepath.Join(elsewhere, "big.txt"): "big"} {
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, name string) {
		t.Helper()
		if err := os.Symlink(target, name); err != nil {
			t.Fatal(err)
		}
	}
	link(filepath.Join(elsewhere, "big.txt"), filepath.Join(data, "dev.txt"))
	link(data, filepath.Join(project, "data"))
	dst, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	m, err := artifact.Import(ctx, dst, "datasets", filepath.Join(project, "data"), "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range m.Files {
		names = append(names, f.Name)
	}
	if slices.Sort(names); !slices.Equal(names, []string{"dev.txt", "train.txt"}) {
		t.Errorf("imported %v, want dev.txt and train.txt", names)
	}
	link(elsewhere, filepath.Join(data, "more"))
	if _, err := artifact.Import(ctx, dst, "datasets", data, ""); err == nil || !strings.Contains(err.Error(), "more links to a directory") {
		t.Errorf("a linked directory inside: %v", err)
	}
	if err := os.Remove(filepath.Join(data, "more")); err != nil {
		t.Fatal(err)
	}
	link(filepath.Join(elsewhere, "gone.txt"), filepath.Join(data, "test.txt"))
	if _, err := artifact.Import(ctx, dst, "datasets", data, ""); err == nil || !strings.Contains(err.Error(), "test.txt") {
		t.Errorf("a dangling link inside: %v", err)
	}
}
