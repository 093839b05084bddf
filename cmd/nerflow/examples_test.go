package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/registry"
)

// The example specs load and expand against the stages of this binary, and
// register their final models. They read the benchmark data beside the
// clone (../shared/data), which users do not have.
func TestExamples(t *testing.T) {
	if _, err := os.Stat("../../../shared/data/conll03"); err != nil {
		t.Skip("the examples need ../shared/data beside the clone")
	}
	files, _ := filepath.Glob("../../examples/*.yaml")
	if len(files) == 0 {
		t.Fatal("no examples")
	}
	for _, f := range files {
		s, err := spec.Load(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		g, err := s.Expand()
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		registers := 0
		for _, n := range g.Nodes {
			if n.Stage == registry.StageName {
				registers++
			}
		}
		if registers == 0 {
			t.Errorf("%s registers no model", f)
		}
	}
}
