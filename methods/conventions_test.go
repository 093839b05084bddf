package methods_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/distant"
	"github.com/nerflow/nerflow/eval"
	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/refine"
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
	if distant {
		return expandMethod(dir, m, distantSpec(m))
	}
	return expandMethod(dir, m, specText(m, "  train: ./data/train.conll\n"))
}

// expandMethod expands a call of method m, and if that fails and m reads
// unlabeled text, the call with it.
func expandMethod(dir string, m *spec.Method, text string) (*spec.Spec, *spec.Graph, error) {
	s, g, err := parseAndExpand(dir, text)
	if _, ok := m.Input("unlabeled"); err != nil && ok {
		s, g, err = parseAndExpand(dir, text+"  unlabeled: ./data/unlabeled.txt\n")
	}
	return s, g, err
}

// distantSpec calls method m with its defaults on raw text and a gazetteer.
func distantSpec(m *spec.Method) string {
	return specText(m, "  train: ./data/raw.txt\n  gazetteers: [./data/gaz.txt]\n")
}

// specText calls method m with its defaults on the train input given and
// a dev and a test input (and word vectors, if it reads them).
func specText(m *spec.Method, train string) string {
	text := fmt.Sprintf("name: conv\nmethod: %s\ninputs:\n  dev: ./data/dev.conll\n  test: ./data/test.conll\n", m.Name) + train
	if _, ok := m.Input("vectors"); ok {
		text += "  vectors: ./data/vectors.json\n"
	}
	return text
}

func parseAndExpand(dir, text string) (*spec.Spec, *spec.Graph, error) {
	s, err := spec.Parse([]byte(text), "m.yaml", dir)
	if err != nil {
		return nil, nil, err
	}
	g, err := s.Expand()
	return s, g, err
}

// inputs says which of the spec's inputs a check expects, and overlay
// whether the method ends by choosing on dev between its final model and
// that model with the gazetteer overlay (a method on distant labels with a
// dev input).
type inputs struct{ dev, test, baseline, overlay bool }

// checkConventions holds a method's graph to the ending every method
// shares (methods/ending.go): each trained model scored on the dev input
// as eval-STEP, each final model (one no other step reads) scored on the
// test input as test or test-STEP and registered as register or
// register-STEP with those reports, every score beside the distant labels'
// when the method labels with gazetteers. On distant labels with a dev
// input, each final model is node overlay or overlay-STEP, the best on dev
// of STEP's model with the overlay in mode override (node
// overlay-override[-STEP]), extend (overlay-extend[-STEP]), fill
// (overlay-fill[-STEP]) and alone,
// in that order (the model alone wins a tie); it keeps STEP's names for
// test and register.
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
	// A model trained only to weigh labels (refine.choose reads its dev
	// score) is a step of no model's making, and not final.
	choosing := map[string]bool{} // evaluations whose report a label choice reads
	for _, n := range g.Nodes {
		if n.Stage == refine.StageChoose {
			for _, in := range n.Inputs {
				choosing[in.Node] = true
			}
		}
	}
	registered := func(id string) bool {
		return slices.ContainsFunc(readers[id], func(r *spec.Node) bool { return r.Stage == registry.StageName })
	}
	// A method with one final model per variant may end with the best of
	// them on dev (node select): its candidates stay final, each tested and
	// registered under its variant.
	amongFinals := func(n *spec.Node) bool {
		models := portNodes(n, "models")
		return n.Stage == eval.StageSelect && n.Name == "select" && len(models) > 1 && !slices.ContainsFunc(models, func(m string) bool { return !registered(m) })
	}
	finals := map[string]bool{} // by spec node name
	for id := range trained {
		if !slices.ContainsFunc(readers[id], func(r *spec.Node) bool {
			return r.Stage != tagger.StageEvaluate && r.Stage != registry.StageName && !amongFinals(r) || choosing[r.ID]
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
	// A variant's choice on dev (select-VARIANT) ends under the
	// variant's name.
	suffix := func(step string) string {
		if suffixed && step != "" {
			return "-" + strings.TrimPrefix(step, "select-")
		}
		return ""
	}
	overlays := 0
	for _, n := range g.Nodes {
		if n.Stage == distant.StageOverlay {
			overlays++
		}
	}
	if !given.overlay && overlays > 0 {
		t.Errorf("%d %s nodes, want none", overlays, distant.StageOverlay)
	}
	// stepOf is the step a final model is named after: the one the overlay
	// choice of overlay[-STEP] started from.
	stepOf := func(id string) string {
		n := node(id)
		if amongFinals(n) {
			// The best variant: its candidates are the variants' final
			// models, each scored on dev, and it is named after no step.
			for i, r := range portNodes(n, "reports") {
				if m := portNodes(n, "models"); i >= len(m) || node(r).Name != "eval-"+node(m[i]).Name {
					t.Errorf("%s: report %d is %s, want the dev score of candidate %d", id, i+1, r, i+1)
				}
			}
			return ""
		}
		if !given.overlay {
			return n.Name
		}
		if n.Stage != eval.StageSelect || n.Name != "overlay" && !strings.HasPrefix(n.Name, "overlay-") {
			t.Errorf("final model %s: want the overlay choice (%s node overlay[-STEP])", id, eval.StageSelect)
			return n.Name
		}
		models, reports := portNodes(n, "models"), portNodes(n, "reports")
		// With the labels' score on dev, also the overlay in override
		// with the model's entities of the types that gain there.
		// With capitalized phrases and name lists, also override with the
		// model's entities that are such phrases (overlay-capitalized),
		// before typed, which then weighs its types.
		// With capitalized phrases, also the model alone with the
		// first-word gate (first-words), just before the model alone.
		suffixOf := strings.TrimPrefix(n.Name, "overlay")
		gatedID, firstID := "", ""
		for _, m := range models {
			switch node(m).Name {
			case "overlay-capitalized" + suffixOf:
				gatedID = m
			case "first-words" + suffixOf:
				firstID = m
			}
		}
		want := 4
		if given.baseline {
			want = 5
		}
		if gatedID != "" {
			want++
		}
		if firstID != "" {
			want++
		}
		if len(models) != want {
			t.Errorf("%s chooses among %v, want the model with the overlay in each mode (and typed, with a baseline) and alone", id, models)
			return n.Name
		}
		plain := node(models[len(models)-1])
		beforePlain := len(models) - 2
		if firstID != "" {
			if f := node(firstID); f.ID != models[beforePlain] || f.Stage != distant.StageFirstWords || portIn(f, "model").Node != plain.ID {
				t.Errorf("%s: first-words%s is %s (%s), want the candidate before the model alone on %s's model", id, suffixOf, f.ID, f.Stage, plain.ID)
			}
			beforePlain--
		}
		if given.baseline {
			typed, typedOn := node(models[beforePlain]), "eval-overlay-override"+suffixOf
			if gatedID != "" {
				typedOn = "eval-overlay-capitalized" + suffixOf
				if g := node(gatedID); g.ID != models[3] || portIn(g, "model").Node != plain.ID {
					t.Errorf("%s: overlay-capitalized%s is %s, want candidate 4 on %s's model", id, suffixOf, g.ID, plain.ID)
				}
			}
			var p map[string]any
			if err := json.Unmarshal(typed.Params, &p); err != nil {
				t.Fatal(err)
			}
			if typed.Name != "overlay-typed"+suffixOf || p["mode"] != "override" || node(portIn(typed, "dev_report").Node).Name != typedOn {
				t.Errorf("%s: the candidate before the model is %s (%v, dev report of %s), want overlay-typed%s on %s", id, typed.ID, p, portIn(typed, "dev_report").Node, suffixOf, typedOn)
			}
		}
		for i, mode := range []string{"override", "extend", "fill"} {
			ov := node(models[i])
			var p map[string]any
			if err := json.Unmarshal(ov.Params, &p); err != nil {
				t.Fatal(err)
			}
			if ov.Stage != distant.StageOverlay || ov.Name != "overlay-"+mode+suffixOf || p["mode"] != mode || portIn(ov, "model").Node != plain.ID {
				t.Errorf("%s: candidate %d is %s (%s, %v), want overlay-%s%s on %s's model", id, i+1, ov.ID, ov.Stage, p, mode, suffixOf, plain.ID)
			}
			// The gazetteers that labeled the train input, or the train
			// input's own distant tags.
			gaz, labeled := s.Origin("nodes."+ov.Name+".inputs.gazetteers"), s.Origin("nodes."+ov.Name+".inputs.labeled")
			if given.baseline && !strings.HasPrefix(gaz, "inputs.gazetteers") || !given.baseline && labeled != "inputs.train" {
				t.Errorf("%s reads gazetteers from %q and labeled from %q", ov.ID, gaz, labeled)
			}
		}
		for i, r := range reports {
			if want := "eval-" + node(models[i]).Name; i >= len(models) || node(r).Name != want {
				t.Errorf("%s: report %d is %s, want %s", id, i+1, r, want)
			}
		}
		if plain.Stage == distant.StageOverlay {
			t.Errorf("%s: the last candidate %s, which wins a tie, is not the model alone", id, plain.ID)
		}
		if suffixed && suffixOf != suffix(plain.Name) {
			t.Errorf("%s is not named after the step %s", id, plain.Name)
		}
		return plain.Name
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
		named := stepOf(id)
		if given.test && (len(test) != 1 || test[0].Name != "test"+suffix(named)) || !given.test && len(test) > 0 {
			t.Errorf("final model %s: want one score on the test input named test%s, have %v", id, suffix(named), names(test))
		}
		if len(reg) != 1 || reg[0].Name != "register"+suffix(named) {
			t.Errorf("final model %s: want it registered by register%s, have %v", id, suffix(named), names(reg))
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
				// Tags given with the train input are distant labels to a
				// method on them, and the overlay's entries are mined from
				// them.
				_, overlay := m.Param("overlay")
				checkConventions(t, s, g, inputs{dev: true, test: true, overlay: overlay})
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
				checkConventions(t, s, g, inputs{dev: true, test: true, baseline: true, overlay: true})
				// Without a dev input to choose on, or with overlay=false,
				// the final model is the method's own.
				s, g, err = expandMethod(dir, m, strings.Replace(distantSpec(m), "  dev: ./data/dev.conll\n", "", 1))
				if err != nil {
					t.Fatalf("%s without dev: %v", m.Name, err)
				}
				checkConventions(t, s, g, inputs{test: true, baseline: true})
				s, g, err = expandMethod(dir, m, "params:\n  overlay: false\n"+distantSpec(m))
				if err != nil {
					t.Fatalf("%s with overlay=false: %v", m.Name, err)
				}
				checkConventions(t, s, g, inputs{dev: true, test: true, baseline: true})
				// The labels refined and chosen on dev: the models that
				// weigh them end nowhere.
				s, g, err = expandMethod(dir, m, "params:\n  refine: auto\n"+distantSpec(m))
				if err != nil {
					t.Fatalf("%s with refine=auto: %v", m.Name, err)
				}
				checkConventions(t, s, g, inputs{dev: true, test: true, baseline: true, overlay: true})
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
			set := func(param string) bool { return regexp.MustCompile(`(?m)^  ` + param + `:`).Match(text) }
			m, _ := spec.LookupMethod(s.Method)
			_, distant := m.Param("overlay")
			overlaid := distant && connected("dev") && !set("mask") && !regexp.MustCompile(`(?m)^  overlay: false`).Match(text)
			checkConventions(t, s, g, inputs{dev: connected("dev"), test: connected("test"), baseline: connected("gazetteers"), overlay: overlaid})
		})
	}
}
