package methods_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/distant"
	"github.com/nerflow/nerflow/eval"
	"github.com/nerflow/nerflow/pipeline/spec"
)

// overlayNodes are the nodes the overlay ending adds after a final model.
var overlayNodes = []string{"overlay-override", "overlay-extend", "overlay-fill", "overlay-capitalized", "overlay-typed", "first-words", "eval-overlay-override", "eval-overlay-extend", "eval-overlay-fill", "eval-overlay-capitalized", "eval-overlay-typed", "eval-first-words", "overlay", "eval-overlay"}

// The main job ends by choosing on dev among its final model (select's)
// and that model with the gazetteer overlay in each mode, in override
// with the model's entities that are capitalized phrases of their sentence
// (overlay-capitalized: the sample's labels hold such phrases) and in
// that override with the model's entities of the types that gain on dev
// (overlay-typed, reading eval-overlay-capitalized's report, gated too),
// the model alone last so that
// it wins a tie; test and register read the choice. Every
// other node is the one the spec made before, so that a rerun finds the
// trained models in the cache and runs only the new nodes.
func TestOverlayEndingOfTheMainJob(t *testing.T) {
	path := filepath.Join("..", "examples", "sample-roster.yaml")
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	expandSample := func(sets ...string) *spec.Graph {
		s, err := spec.Parse(text, path, filepath.Dir(path), sets...)
		if err != nil {
			t.Fatal(err)
		}
		g, err := s.Expand()
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	g, plain := expandSample(), expandSample(noOverlay)
	sel, ok := g.Node("overlay")
	if !ok || sel.Stage != eval.StageSelect {
		t.Fatalf("no %s node overlay in %v", eval.StageSelect, ids(g))
	}
	models, reports := portNodes(sel, "models"), portNodes(sel, "reports")
	if want := []string{"overlay-override", "overlay-extend", "overlay-fill", "overlay-capitalized", "overlay-typed", "first-words", "select"}; !slices.Equal(models, want) {
		t.Errorf("overlay chooses among %v, want %v", models, want)
	}
	if want := []string{"eval-overlay-override", "eval-overlay-extend", "eval-overlay-fill", "eval-overlay-capitalized", "eval-overlay-typed", "eval-first-words", "eval-select"}; !slices.Equal(reports, want) {
		t.Errorf("overlay reads the reports %v, want %v", reports, want)
	}
	if p := nodeParams(t, g, "overlay"); strings.Join(toStrings(p["names"]), "|") != "overlay override|overlay extend|overlay fill|overlay override, capitalized phrases|overlay override, the types that gain on dev|model, common first words off its entities|model" {
		t.Errorf("overlay names %v", p["names"])
	}
	for _, name := range []string{"override", "extend", "fill", "capitalized", "typed"} {
		mode, gated := name, name == "capitalized" || name == "typed"
		if gated {
			mode = "override"
		}
		if n, _ := g.Node("overlay-typed"); name == "typed" && portIn(n, "dev_report").Node != "eval-overlay-capitalized" {
			t.Errorf("overlay-typed reads dev_report %+v", portIn(n, "dev_report"))
		}
		n, _ := g.Node("overlay-" + name)
		p := nodeParams(t, g, n.ID)
		if n.Stage != distant.StageOverlay || p["mode"] != mode || p["case"] != "exact" || modelOf(t, g, n.ID) != "select" || (p["capitalized"] == true) != gated {
			t.Errorf("overlay-%s: %s, params %v, model of %s", name, n.Stage, p, modelOf(t, g, n.ID))
		}
		var gaz []string
		for _, in := range n.Inputs {
			switch {
			case in.Port != "gazetteers":
			case in.Dataset != "":
				gaz = append(gaz, filepath.Base(in.Dataset))
			default:
				gaz = append(gaz, in.Node)
			}
		}
		// The gazetteer, not the names found in the training text: with
		// the name lists it finds the names of the text it tags, as the
		// labels of a split do.
		if want := []string{"gazetteer.tsv"}; !slices.Equal(gaz, want) || inputOf(n, "stopwords") != "stopwords.txt" || inputOf(n, "names") != "names.tsv" {
			t.Errorf("overlay-%s reads gazetteers %v, stopwords %q and names %q, want the label node's %v", name, gaz, inputOf(n, "stopwords"), inputOf(n, "names"), want)
		}
		ev, _ := g.Node("eval-overlay-" + name)
		if modelOf(t, g, ev.ID) != n.ID || portIn(ev, "baseline").Node != "labels-dev" {
			t.Errorf("eval-overlay-%s reads %+v", name, ev.Inputs)
		}
	}
	// The model alone with the first-word gate, which counts the words of
	// the labels the gazetteers made.
	if n, _ := g.Node("first-words"); n.Stage != distant.StageFirstWords || modelOf(t, g, n.ID) != "select" || portIn(n, "text").Node != "label" {
		t.Errorf("first-words: %s, inputs %+v", n.Stage, n.Inputs)
	}
	for _, id := range []string{"test", "register", "eval-overlay"} {
		if got := modelOf(t, g, id); got != "overlay" {
			t.Errorf("%s reads the model of %s, want overlay's", id, got)
		}
	}

	// overlay=false is the graph as it was; every node but test and
	// register is the same with the overlay.
	for _, id := range overlayNodes {
		if _, ok := plain.Node(id); ok {
			t.Errorf("overlay=false keeps node %s", id)
		}
	}
	a, b := shapes(g), shapes(plain)
	for id, s := range b {
		if id == "test" || id == "register" {
			continue
		}
		if s2, ok := a[id]; !ok || !sameShape(s, s2) {
			t.Errorf("node %s differs with the overlay", id)
		}
	}
	if len(a) != len(b)+len(overlayNodes) {
		t.Errorf("%d nodes with the overlay, %d without: want %d more", len(a), len(b), len(overlayNodes))
	}
}

func sameShape(a, b shape) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func toStrings(v any) []string {
	var out []string
	if l, ok := v.([]any); ok {
		for _, s := range l {
			out = append(out, s.(string))
		}
	}
	return out
}

// Distant labels given as files (CoNLL-2003's train_label_dist.txt, no
// gazetteer): the overlay's entries are mined from the train input's
// tags, read with its files; a method fanned out chooses per copy.
func TestOverlayMinedFromGivenLabels(t *testing.T) {
	g, err := expand(t, fixture(t), example(t, "conll03-negsample.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, sampling := range []string{"uniform", "weighted"} {
		fan := "[sampling=" + sampling + "]"
		ov, ok := g.Node("overlay-fill" + fan)
		if !ok {
			t.Fatalf("no overlay-fill%s in %v", fan, ids(g))
		}
		p := nodeParams(t, g, ov.ID)
		if inputOf(ov, "labeled") != "conll03" || p["labeled_file"] != "train_text.txt" || p["labeled_labels"] != "train_label_dist.txt" ||
			inputOf(ov, "gazetteers") != "" || modelOf(t, g, ov.ID) != "train"+fan {
			t.Errorf("overlay-fill%s: params %v, inputs %+v", fan, p, ov.Inputs)
		}
		sel, _ := g.Node("overlay" + fan)
		models := portNodes(sel, "models")
		if want := []string{"overlay-override" + fan, "overlay-extend" + fan, "overlay-fill" + fan, "first-words" + fan, "train" + fan}; !slices.Equal(models, want) {
			t.Errorf("overlay%s chooses among %v, want %v", fan, models, want)
		}
		// The first-word gate counts the words of the train input as
		// given, read with its files.
		fw, _ := g.Node("first-words" + fan)
		if p := nodeParams(t, g, fw.ID); inputOf(fw, "text") != "conll03" || p["text_file"] != "train_text.txt" || p["text_labels"] != "train_label_dist.txt" || modelOf(t, g, fw.ID) != "train"+fan {
			t.Errorf("first-words%s: params %v, inputs %+v", fan, p, fw.Inputs)
		}
		if got := modelOf(t, g, "register"+fan); got != "overlay"+fan {
			t.Errorf("register%s reads the model of %s", fan, got)
		}
	}
}

// Gold labels get no overlay: the missing-annotation experiment masks
// gold tags (asking for the overlay there is an error), and supervised
// training has no distant labels.
func TestNoOverlayOnGoldLabels(t *testing.T) {
	dir := fixture(t)
	for _, c := range []struct {
		file string
		sets []string
	}{{"conll03-missing.yaml", []string{"mask=0.5"}}, {"conll03-supervised.yaml", nil}} {
		g, err := expand(t, dir, example(t, c.file), c.sets...)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range g.Nodes {
			if n.Stage == distant.StageOverlay || strings.HasPrefix(n.Name, "overlay") {
				t.Errorf("%s: node %s", c.file, n.ID)
			}
		}
	}
	if _, err := expand(t, dir, example(t, "conll03-missing.yaml"), "mask=0.5", "overlay=true"); err == nil || !strings.Contains(err.Error(), "params.overlay") {
		t.Errorf("overlay=true with mask: %v", err)
	}
}
