package methods_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/augment"
	"github.com/nerflow/nerflow/subset"
	"github.com/nerflow/nerflow/train/tagger"
)

// The example splits the corpus, pretrains the language models on both
// parts' text and trains three taggers on the same labeled 10%: the
// baseline without language models, and their states after the first
// layer or at the input.
func TestTagLMGraph(t *testing.T) {
	dir := fixture(t)
	g, err := expand(t, dir, example(t, "conll03-taglm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"split", "lm", "vectors"}
	for _, v := range []string{"none", "layer1", "input"} {
		want = append(want, "tagger-"+v, "eval-tagger-"+v, "register-tagger-"+v)
	}
	want = append(want, "select", "eval-select", "register") // the best on dev of the three
	if got := ids(g); !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
		t.Fatalf("nodes %v\nwant  %v", got, want)
	}
	split, _ := g.Node("split")
	if p := nodeParams(t, g, "split"); split.Stage != subset.StageSplit || p["labeled"] != 0.1 || p["unlabeled"] != 0.5 ||
		p["corpus_labels"] != "train_label_true.txt" || p["seed"] != 1.0 {
		t.Errorf("split: %s %v", split.Stage, p)
	}
	lm, _ := g.Node("lm")
	if p := nodeParams(t, g, "lm"); lm.Stage != augment.StageLM || p["hidden"] != 128.0 || p["unlabeled_format"] != "text" ||
		inputOf(lm, "corpus") != "split.labeled" || inputOf(lm, "unlabeled") != "split.unlabeled" {
		t.Errorf("lm: %s %v %+v", lm.Stage, p, lm.Inputs)
	}
	for _, v := range []string{"none", "layer1", "input"} {
		n, _ := g.Node("tagger-" + v)
		p := nodeParams(t, g, n.ID)
		if p["lm_placement"] != v || p["layers"] != 2.0 || p["head"] != tagger.CRFHead || inputOf(n, "corpus") != "split.labeled" {
			t.Errorf("%s: %v %+v", n.ID, p, n.Inputs)
		}
		if got, want := inputOf(n, "lm"), map[bool]string{true: "", false: "lm.lm"}[v == "none"]; got != want {
			t.Errorf("%s reads language models %q, want %q", n.ID, got, want)
		}
	}
	if p := nodeParams(t, g, "register-tagger-layer1"); p["name"] != "conll03-taglm-layer1" {
		t.Errorf("register-tagger-layer1 params %v", p)
	}
}

// Without a split, the train input is the labeled set and the unlabeled
// input the text; the baseline alone needs no language models.
func TestTagLMInputs(t *testing.T) {
	dir := fixture(t)
	g, err := expand(t, dir, "method: taglm\ninputs:\n  train: ../../data/test.conll\n  unlabeled: ../../data/raw.txt\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"lm", "tagger-layer1", "register-tagger-layer1"}; !slices.Equal(ids(g), want) {
		t.Fatalf("nodes %v, want %v", ids(g), want)
	}
	lm, _ := g.Node("lm")
	if inputOf(lm, "corpus") != "test.conll" || inputOf(lm, "unlabeled") != "raw.txt" {
		t.Errorf("lm inputs %+v", lm.Inputs)
	}
	if n, _ := g.Node("tagger-layer1"); inputOf(n, "corpus") != "test.conll" || inputOf(n, "lm") != "lm.lm" {
		t.Errorf("tagger-layer1 inputs %+v", n.Inputs)
	}
	g, err = expand(t, dir, "method: taglm\nparams: {variants: [none], labeled: 0.1}\ninputs:\n  train: ../../data/test.conll\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"split", "tagger-none", "register-tagger-none"}; !slices.Equal(ids(g), want) {
		t.Fatalf("nodes %v, want %v", ids(g), want)
	}
}

func TestTagLMErrors(t *testing.T) {
	dir := fixture(t)
	for _, c := range []struct{ text, want string }{
		{"method: taglm\ninputs: {train: ../../data/test.conll}\n", "m.yaml:2: inputs: the language models need unlabeled text"},
		{"method: taglm\nparams:\n  layers: 1\ninputs: {train: ../../data/test.conll, unlabeled: ../../data/raw.txt}\n", "m.yaml:3: params.layers: variant layer1 feeds"},
		{"method: taglm\nparams:\n  unlabeled: 0.3\ninputs: {train: ../../data/test.conll, unlabeled: ../../data/raw.txt}\n", "m.yaml:3: params.unlabeled: only matters with labeled < 1"},
		{"method: taglm\nparams:\n  labeled: 0.1\n  unlabeled_format: brown\ninputs: {train: ../../data/test.conll, unlabeled: ../../data/raw.txt}\n", "params.unlabeled_files: with a split, the language models read the split's unlabeled.txt"},
		{"method: taglm\nparams:\n  variants: [output]\ninputs: {train: ../../data/test.conll}\n", `params.variants: element 0: "output" is not one of none, input, layer1`},
	} {
		if _, err := expand(t, dir, c.text); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("spec:\n%s\nerror %v\nwant %s", c.text, err, c.want)
		}
	}
}
