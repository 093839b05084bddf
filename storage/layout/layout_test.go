package layout

import (
	"testing"

	"github.com/nerflow/nerflow/storage"
)

func TestKeysAreValidAndParseBack(t *testing.T) {
	const key, run = "ab12cd", "20261126-070000-abcdef"
	for _, k := range []string{NodeRecord(key), AttemptOutputs(key, "x1") + "out/i", Checkpoints(key) + "/latest.json",
		Datasets + "/ff00/train.txt", RunManifest(run), LiveMarker(run), ModelVersion("ner", 3), ModelTags("ner"), RegistrySynced,
		Blob(blobDigest)} {
		if err := storage.ValidateKey(k); err != nil {
			t.Errorf("%s: %v", k, err)
		}
	}
	if k, ok := NodeOfRecord(NodeRecord(key)); !ok || k != key {
		t.Errorf("NodeOfRecord: %q %v", k, ok)
	}
	for _, k := range []string{"nodes/a/b.json", "nodes/.json", "nodes/x.tmp", "runs/x.json"} {
		if got, ok := NodeOfRecord(k); ok {
			t.Errorf("NodeOfRecord(%q) = %q, want no node record", k, got)
		}
	}
	if id, ok := RunOfManifest(RunManifest(run)); !ok || id != run {
		t.Errorf("RunOfManifest: %q %v", id, ok)
	}
	for _, k := range []string{"runs/x/other.json", "runs/a/b/manifest.json", "runs//manifest.json", "nodes/manifest.json"} {
		if id, ok := RunOfManifest(k); ok {
			t.Errorf("RunOfManifest(%q) = %q", k, id)
		}
	}
	if id, ok := RunOfLiveMarker(LiveMarker(run)); !ok || id != run {
		t.Errorf("RunOfLiveMarker: %q %v", id, ok)
	}
	if name, ok := ModelOf(ModelVersion("ner", 2)); !ok || name != "ner" {
		t.Errorf("ModelOf: %q %v", name, ok)
	}
	if n, ok := VersionOf("ner", ModelVersion("ner", 12)); !ok || n != 12 {
		t.Errorf("VersionOf: %d %v", n, ok)
	}
	if _, ok := VersionOf("ner", ModelTags("ner")); ok {
		t.Error("the tags key parsed as a version")
	}
	if d, ok := DigestOfBlob(Blob(blobDigest)); !ok || d != blobDigest {
		t.Errorf("DigestOfBlob: %q %v", d, ok)
	}
	for _, k := range []string{"blobs/sha256/", "blobs/md5/ab", "blobs/sha256/ab/c", "datasets/sha256/ab"} {
		if d, ok := DigestOfBlob(k); ok {
			t.Errorf("DigestOfBlob(%q) = %q", k, d)
		}
	}
}

const blobDigest = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
