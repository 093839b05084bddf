package trainstage

import (
	"path/filepath"
	"testing"

	_ "github.com/nerflow/nerflow/embeddings" // stage embeddings.vectors, which the examples start with
	"github.com/nerflow/nerflow/pipeline/spec"
	_ "github.com/nerflow/nerflow/registry" // stage registry.register, which the examples end with
)

// The example specs parse and validate against the registered stages
// (parameters, inputs, references).
func TestExampleSpecs(t *testing.T) {
	specs, err := filepath.Glob(filepath.Join("..", "..", "examples", "conll03-*.yaml"))
	if err != nil || len(specs) == 0 {
		t.Fatalf("no example specs: %v", err)
	}
	for _, path := range specs {
		s, err := spec.Load(path)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		g, err := s.Expand() // checks params and inputs against the stages
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if len(g.Datasets()) == 0 {
			t.Errorf("%s: no datasets", path)
		}
	}
}
