package cli

import (
	"testing"

	"github.com/nerflow/nerflow/storage/artifact"
)

// A model's size separates what it holds from what it shares (the word
// vectors it carries unchanged are stored once for every model).
func TestModelSizeSeparatesSharedFiles(t *testing.T) {
	own := artifact.Manifest{Files: []artifact.File{{Name: "weights.pt", Size: 3 << 20}}}
	if got := modelSize(own); got != "3.0 MiB" {
		t.Errorf("modelSize without shared files = %q", got)
	}
	shared := own
	shared.Files = append(shared.Files, artifact.File{Name: "vectors.bin", Size: 133 << 20, Blob: "blobs/sha256/ab"})
	if got := modelSize(shared); got != "3.0 MiB own + 133 MiB shared" {
		t.Errorf("modelSize with shared vectors = %q", got)
	}
}
