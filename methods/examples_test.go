package methods_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/distant"
	"github.com/nerflow/nerflow/pipeline/spec"
	// The stages the examples use beyond the methods' own, as the binary
	// links them (cmd/nerflow/plugins.go).
	_ "github.com/nerflow/nerflow/augment"
	_ "github.com/nerflow/nerflow/predict"
	_ "github.com/nerflow/nerflow/registry"
	_ "github.com/nerflow/nerflow/train/encoder"
)

// sampleDir is the openly licensed sample the README's main job runs on.
var sampleDir = filepath.Join("..", "examples", "data", "brown-press")

// sharedData is the benchmark data the CoNLL-2003 examples read; a user's
// clone does not have it.
var sharedData = filepath.Join("..", "..", "shared", "data")

// The example specs parse and validate against the registered stages
// (parameters, inputs, references). The sample's spec is always checked;
// the benchmark specs only where their data is beside the repository.
func TestExampleSpecs(t *testing.T) {
	specs, err := filepath.Glob(filepath.Join("..", "examples", "*.yaml"))
	if err != nil || len(specs) == 0 {
		t.Fatalf("no example specs: %v", err)
	}
	var sample bool
	for _, path := range specs {
		t.Run(filepath.Base(path), func(t *testing.T) {
			if strings.HasPrefix(filepath.Base(path), "sample-") {
				sample = true
			} else if _, err := os.Stat(sharedData); err != nil {
				t.Skipf("%s reads the benchmark data in %s, which is absent: %v", path, sharedData, err)
			}
			s, err := spec.Load(path)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			g, err := s.Expand() // checks params and inputs against the stages
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if len(g.Datasets()) == 0 {
				t.Errorf("%s: no datasets", path)
			}
		})
	}
	if !sample {
		t.Error("no examples/sample-*.yaml: the README's main job needs one")
	}
}

// The sample's files are what its README says: sizes, valid BIO tags of the
// four CoNLL types, a typed gazetteer of those types. A broken edit fails
// here rather than in `make run`. The statistics and the distant labels'
// scores on the dev split are logged, not asserted.
func TestSampleData(t *testing.T) {
	types := []string{"PER", "LOC", "ORG", "MISC"}
	read := func(name string, opts ...corpus.Option) *corpus.Corpus {
		t.Helper()
		c, err := corpus.ReadFile(filepath.Join(sampleDir, name), opts...)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	train := read("train.txt")
	gold := []corpus.Option{corpus.WithScheme(corpus.BIO), corpus.WithTypes(types...), corpus.Strict()}
	dev, test := read("dev.conll", gold...), read("test.conll", gold...)
	for _, c := range []struct {
		name      string
		corpus    *corpus.Corpus
		sentences int
		tagged    bool
	}{
		{"train.txt", train, 3988, false},
		{"dev.conll", dev, 219, true},
		{"test.conll", test, 416, true},
	} {
		if n := len(c.corpus.Sentences); n != c.sentences {
			t.Errorf("%s: %d sentences; its README says %d", c.name, n, c.sentences)
		}
		entities := map[string]int{}
		for i, s := range c.corpus.Sentences {
			if (s.Tags != nil) != c.tagged {
				t.Fatalf("%s: sentence %d: tagged %v, want %v", c.name, i+1, s.Tags != nil, c.tagged)
			}
			spans, err := corpus.BIO.Spans(s.Tags)
			if err != nil {
				t.Fatalf("%s: sentence %d: %v", c.name, i+1, err)
			}
			for _, sp := range spans {
				entities[sp.Label]++
			}
		}
		if c.tagged {
			for _, typ := range types {
				if entities[typ] == 0 {
					t.Errorf("%s: no %s entity", c.name, typ)
				}
			}
		}
		t.Logf("%s: %d sentences, %d tokens, entities %v", c.name, len(c.corpus.Sentences), c.corpus.NumTokens(), entities)
	}

	stop, err := os.ReadFile(filepath.Join(sampleDir, "stopwords.txt"))
	if err != nil {
		t.Fatal(err)
	}
	words := strings.Fields(string(stop))
	if len(words) == 0 {
		t.Error("stopwords.txt is empty")
	}
	opts := []distant.Option{distant.WithStopwords(words)} // as examples/sample-distant.yaml
	g, err := distant.Load(distant.Source{Path: filepath.Join(sampleDir, "gazetteer.tsv")}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if g.Report.Format != distant.FormatTyped {
		t.Errorf("gazetteer.tsv read as %s, want typed", g.Report.Format)
	}
	known := map[string]bool{"PER": true, "LOC": true, "ORG": true, "MISC": true}
	for typ, n := range g.Report.Types {
		if !known[typ] {
			t.Errorf("gazetteer.tsv: %d entries of type %q, not a CoNLL type", n, typ)
		}
	}
	if d := g.Report.Duplicates.Count + g.Report.Empty.Count + g.Report.NoTokens.Count; d > 0 {
		t.Errorf("gazetteer.tsv: %d duplicate, empty or token-less lines: %+v", d, g.Report)
	}
	t.Logf("gazetteer.tsv: %d entries %v, %d type conflicts", g.Report.Entries, g.Report.Types, g.Report.Conflicts.Count)

	_, report, err := distant.Run(train, []*distant.Gazetteer{g}, dev, corpus.BIO, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if report.Gold == nil {
		t.Fatal("no score against the dev split")
	}
	m := report.Gold.Report.Micro
	t.Logf("distant labels on dev.conll: P %.1f R %.1f F1 %.1f", 100*m.Precision, 100*m.Recall, 100*m.F1)
	for _, typ := range types {
		s := report.Gold.Report.Types[typ]
		t.Logf("  %-4s P %.1f R %.1f F1 %.1f (%d gold)", typ, 100*s.Precision, 100*s.Recall, 100*s.F1, s.Support)
	}
}
