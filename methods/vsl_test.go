package methods_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/train/tagger"
	"github.com/nerflow/nerflow/train/vsl"
)

// portInput returns the node and output a node's port reads (empty when
// unconnected).
func portInput(t *testing.T, g *spec.Graph, id, port string) spec.Input {
	t.Helper()
	n, ok := g.Node(id)
	if !ok {
		t.Fatalf("no node %s in %v", id, ids(g))
	}
	return portIn(n, port)
}

// The example splits the training set 10%/50%, trains the hierarchical
// VSL on both parts, scores it on the validation split (train.evaluate
// loads the model kind) and registers it.
func TestVSLGraph(t *testing.T) {
	dir := fixture(t)
	g, err := expand(t, dir, example(t, "conll03-vsl.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"vectors", "split", "train", "eval-train", "register"}
	if got := ids(g); !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
		t.Fatalf("nodes %v, want %v", got, want)
	}
	if p := nodeParams(t, g, "split"); p["labeled"] != 0.1 || p["unlabeled"] != 0.5 || p["seed"] != 1.0 || p["corpus_file"] != "train_text.txt" || p["corpus_labels"] != "train_label_true.txt" {
		t.Errorf("split params %v", p)
	}
	tr, _ := g.Node("train")
	if p := nodeParams(t, g, "train"); tr.Stage != vsl.StageTrain || p["variant"] != vsl.Hier || p["dev_file"] != "valid_text.txt" {
		t.Errorf("train: stage %s, params %v", tr.Stage, p)
	}
	for port, from := range map[string]string{"corpus": "split.labeled", "unlabeled": "split.unlabeled", "embeddings": "vectors.embeddings"} {
		if in := portInput(t, g, "train", port); in.Node+"."+in.Output != from {
			t.Errorf("train.%s reads %+v, want %s", port, in, from)
		}
	}
	ev, _ := g.Node("eval-train")
	if in := portInput(t, g, "eval-train", "model"); ev.Stage != tagger.StageEvaluate || in.Node != "train" {
		t.Errorf("eval-train (%s) reads the model from %+v", ev.Stage, in)
	}
	if in := portInput(t, g, "register", "model"); in.Node != "train" {
		t.Errorf("register reads the model from %+v", in)
	}
}

// Without the unlabeled text (the supervised-only ablation) and with the
// flat variant, the split is the same node: the same labeled sentences.
func TestVSLAblations(t *testing.T) {
	dir := fixture(t)
	full, err := expand(t, dir, example(t, "conll03-vsl.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, set := range []string{"semi=false", "variant=flat"} {
		g, err := expand(t, dir, example(t, "conll03-vsl.yaml"), set)
		if err != nil {
			t.Fatal(err)
		}
		a, b := shapes(full), shapes(g)
		if a["split"].Params != b["split"].Params || a["vectors"].Params != b["vectors"].Params {
			t.Errorf("%s: the split or the vectors differ", set)
		}
		if a["train"].Params == b["train"].Params && set == "variant=flat" {
			t.Errorf("%s: train's parameters unchanged", set)
		}
		if in := portInput(t, g, "train", "unlabeled"); (in.Node != "") == (set == "semi=false") {
			t.Errorf("%s: train's unlabeled input %+v", set, in)
		}
	}
}

func TestVSLErrors(t *testing.T) {
	dir := fixture(t)
	ex := example(t, "conll03-vsl.yaml")
	for _, c := range []struct {
		text string
		sets []string
		want string
	}{
		{strings.Replace(ex, "  vectors: ~", "  # vectors: ~", 1), nil, "inputs.vectors: the VSL reads fixed pretrained word vectors"},
		{ex, []string{"labeled=1"}, "params.unlabeled: with labeled: 1 nothing is split"},
		{ex, []string{"unlabeled=0"}, "params.unlabeled: semi-supervised training needs unlabeled text"},
	} {
		_, err := expand(t, dir, c.text, c.sets...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %s", c.sets, err, c.want)
		}
	}
}
