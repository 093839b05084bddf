package methods_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/registry"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/train/tagger"
)

// conventionFixture writes empty input files; the returned directory is
// the spec's, and the files are data/NAME under it.
func conventionFixture(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"train.conll", "dev.conll", "test.conll", "raw.txt", "unlabeled.txt", "gaz.txt", "vectors.json"} {
		p := filepath.Join(dir, "data", f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// buildWithDefaults expands method m with its default parameters on a
// train, dev and test input (and word vectors, if it reads them): on gold
// tags, or with distant on raw text and a gazetteer. A method that needs
// unlabeled text with its defaults gets it on the second try.
func buildWithDefaults(dir string, m *spec.Method, distant bool) (*spec.Spec, *spec.Graph, error) {
	text := fmt.Sprintf("name: conv\nmethod: %s\ninputs:\n  dev: ./data/dev.conll\n  test: ./data/test.conll\n", m.Name)
	if distant {
		text += "  train: ./data/raw.txt\n  gazetteers: [./data/gaz.txt]\n"
	} else {
		text += "  train: ./data/train.conll\n"
	}
	if _, ok := m.Input("vectors"); ok {
		text += "  vectors: ./data/vectors.json\n"
	}
	s, g, err := parseAndExpand(dir, text)
	if _, ok := m.Input("unlabeled"); err != nil && ok {
		s, g, err = parseAndExpand(dir, text+"  unlabeled: ./data/unlabeled.txt\n")
	}
	return s, g, err
}

func parseAndExpand(dir, text string) (*spec.Spec, *spec.Graph, error) {
	s, err := spec.Parse([]byte(text), "m.yaml", dir)
	if err != nil {
		return nil, nil, err
	}
	g, err := s.Expand()
	return s, g, err
}

// inputs says which of the spec's inputs a check expects.
type inputs struct{ dev, test, baseline bool }

// checkConventions holds a method's graph to the ending every method
// shares (methods/ending.go): each trained model scored on the dev input
// as eval-STEP, each final model (one no other step reads) scored on the
// test input as test or test-STEP and registered as register or
// register-STEP with those reports, every score beside the distant labels'
// when the method labels with gazetteers.
func checkConventions(t *testing.T, s *spec.Spec, g *spec.Graph, given inputs) {
	t.Helper()
	node := func(id string) *spec.Node {
		n, ok := g.Node(id)
		if !ok {
			t.Fatalf("no node %s", id)
		}
		return n
	}
	// split says which input of the spec an evaluation's gold tags are.
	split := func(ev *spec.Node) string {
		return strings.TrimPrefix(s.Origin("nodes."+ev.Name+".inputs.gold"), "inputs.")
	}
	// trained: the nodes whose output model is a checkpoint; readers: who
	// reads each one's model, by stage.
	trained := map[string]bool{}
	readers := map[string][]*spec.Node{}
	for _, n := range g.Nodes {
		st, ok := stages.Lookup(n.Stage)
		if !ok {
			t.Fatalf("node %s: stage %s is not registered", n.ID, n.Stage)
		}
		if slices.ContainsFunc(st.Outputs, func(p stages.Port) bool { return p.Name == "model" && p.Kind == "checkpoint" }) {
			trained[n.ID] = true
		}
		for _, in := range n.Inputs {
			if in.Output == "model" {
				readers[in.Node] = append(readers[in.Node], n)
			}
		}
	}
	finals := map[string]bool{} // by spec node name
	for id := range trained {
		if !slices.ContainsFunc(readers[id], func(r *spec.Node) bool {
			return r.Stage != tagger.StageEvaluate && r.Stage != registry.StageName
		}) {
			finals[node(id).Name] = true
		}
	}
	if len(finals) == 0 {
		t.Fatalf("no final model (a trained model no other step reads) among %v", ids(g))
	}
	suffixed := len(finals) > 1
	for _, n := range g.Nodes {
		if n.Stage == registry.StageName && n.Name != "register" {
			suffixed = true // a method with one final model per variant
		}
	}
	suffix := func(step string) string {
		if suffixed {
			return "-" + step
		}
		return ""
	}

	for id := range trained {
		step := node(id).Name
		var dev, test, reg []*spec.Node
		for _, r := range readers[id] {
			switch {
			case r.Stage == registry.StageName:
				reg = append(reg, r)
			case r.Stage == tagger.StageEvaluate && split(r) == "dev":
				dev = append(dev, r)
			case r.Stage == tagger.StageEvaluate && split(r) == "test":
				test = append(test, r)
			case r.Stage == tagger.StageEvaluate:
				t.Errorf("%s scores %s on %q, neither the dev nor the test input", r.ID, id, split(r))
			}
		}
		for _, ev := range append(slices.Clone(dev), test...) {
			if given.baseline && portIn(ev, "baseline").Node == "" {
				t.Errorf("%s scores %s without the distant labels' baseline", ev.ID, id)
			}
		}
		if given.dev && (len(dev) != 1 || dev[0].Name != "eval-"+step) || !given.dev && len(dev) > 0 {
			t.Errorf("%s: want one score on the dev input named eval-%s, have %v", id, step, names(dev))
		}
		if !finals[step] {
			if len(test) > 0 || len(reg) > 0 {
				t.Errorf("%s is read by a later step, yet scored on test (%v) or registered (%v)", id, names(test), names(reg))
			}
			continue
		}
		if given.test && (len(test) != 1 || test[0].Name != "test"+suffix(step)) || !given.test && len(test) > 0 {
			t.Errorf("final model %s: want one score on the test input named test%s, have %v", id, suffix(step), names(test))
		}
		if len(reg) != 1 || reg[0].Name != "register"+suffix(step) {
			t.Errorf("final model %s: want it registered by register%s, have %v", id, suffix(step), names(reg))
			continue
		}
		var reports []string
		for _, in := range reg[0].Inputs {
			if in.Port == "reports" {
				reports = append(reports, in.Node)
			}
		}
		if want := names(append(dev, test...)); !slices.Equal(reports, want) {
			t.Errorf("%s registers %s with reports %v, want its dev and test scores %v", reg[0].ID, id, reports, want)
		}
	}
}

func names(ns []*spec.Node) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.ID)
	}
	return out
}

// Every registered method, built with its defaults on gold tags (and, if
// it takes gazetteers, on distant labels), follows the shared ending and
// its names.
func TestEveryMethodFollowsTheConventions(t *testing.T) {
	dir := conventionFixture(t)
	methods := spec.Methods()
	if len(methods) < 8 {
		t.Fatalf("%d methods registered", len(methods))
	}
	for _, m := range methods {
		t.Run(m.Name, func(t *testing.T) {
			_, distant := m.Input("gazetteers")
			s, g, err := buildWithDefaults(dir, m, false)
			switch {
			case err == nil:
				checkConventions(t, s, g, inputs{dev: true, test: true})
			case distant:
				t.Logf("%s does not build on gold tags alone: %v", m.Name, err)
			default:
				t.Fatalf("%s with its defaults: %v", m.Name, err)
			}
			if distant {
				s, g, err := buildWithDefaults(dir, m, true)
				if err != nil {
					t.Fatalf("%s with its defaults and a gazetteer: %v", m.Name, err)
				}
				checkConventions(t, s, g, inputs{dev: true, test: true, baseline: true})
			}
		})
	}
}

// The example specs that call a method follow the conventions too, with
// their parameters (the sample's always; the benchmark's where their data
// is beside the repository).
func TestExampleMethodsFollowTheConventions(t *testing.T) {
	specs, err := filepath.Glob(filepath.Join("..", "examples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range specs {
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains("\n"+string(text), "\nmethod: ") {
			continue // a hand-written graph
		}
		t.Run(filepath.Base(path), func(t *testing.T) {
			if !strings.HasPrefix(filepath.Base(path), "sample-") {
				if _, err := os.Stat(sharedData); err != nil {
					t.Skipf("reads the benchmark data in %s, which is absent", sharedData)
				}
			}
			s, err := spec.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			g, err := s.Expand()
			if err != nil {
				t.Fatal(err)
			}
			connected := func(input string) bool { return regexp.MustCompile(`(?m)^  ` + input + `:`).Match(text) }
			checkConventions(t, s, g, inputs{dev: connected("dev"), test: connected("test"), baseline: connected("gazetteers")})
		})
	}
}
