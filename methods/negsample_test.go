package methods_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/eval"
	"github.com/nerflow/nerflow/subset"
	"github.com/nerflow/nerflow/train/tagger"
)

// The missing-annotation example makes one masking node per p, one tagger
// and one evaluation per p and sampling, and one table that reads the
// evaluations row by row (p slowest) with the trainings beside them.
func TestNegSampleMaskGrid(t *testing.T) {
	dir := fixture(t)
	g, err := expand(t, dir, example(t, "conll03-missing.yaml"), "mask=0.5,0.9", "epochs=3")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"vectors", "mask[p=0.5]", "mask[p=0.9]",
		"train[p=0.5,sampling=uniform]", "train[p=0.5,sampling=weighted]", "train[p=0.9,sampling=uniform]", "train[p=0.9,sampling=weighted]",
		"eval-train[p=0.5,sampling=uniform]", "eval-train[p=0.5,sampling=weighted]", "eval-train[p=0.9,sampling=uniform]", "eval-train[p=0.9,sampling=weighted]",
		"register[p=0.5,sampling=uniform]", "register[p=0.5,sampling=weighted]", "register[p=0.9,sampling=uniform]", "register[p=0.9,sampling=weighted]", "table-dev"}
	if got := ids(g); !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
		t.Fatalf("nodes %v\nwant  %v", got, want)
	}
	if m, _ := g.Node("mask[p=0.9]"); m.Stage != subset.StageMask {
		t.Errorf("mask[p=0.9] runs %s", m.Stage)
	}
	if p := nodeParams(t, g, "mask[p=0.9]"); p["p"] != 0.9 || p["corpus_labels"] != "train_label_true.txt" {
		t.Errorf("mask[p=0.9] params %v", p)
	}
	tr, _ := g.Node("train[p=0.9,sampling=weighted]")
	var corpusFrom, completeFrom string
	for _, in := range tr.Inputs {
		switch in.Port {
		case "corpus":
			corpusFrom = in.Node + "." + in.Output
		case "complete":
			completeFrom = in.Dataset
		}
	}
	if corpusFrom != "mask[p=0.9].masked" || !strings.HasSuffix(completeFrom, "conll03") {
		t.Errorf("train[p=0.9,sampling=weighted] reads corpus %q, complete %q", corpusFrom, completeFrom)
	}
	p := nodeParams(t, g, tr.ID)
	if p["head"] != tagger.SpanHead || p["loss"] != tagger.LossNegSample || p["sampling"] != tagger.SamplingWeighted || p["complete_labels"] != "train_label_true.txt" || p["epochs"] != 3.0 || p["min_steps"] != 1000.0 {
		t.Errorf("%s params %v", tr.ID, p)
	}
	table, _ := g.Node("table-dev")
	var reports, training []string
	for _, in := range table.Inputs {
		if in.Port == "reports" {
			reports = append(reports, in.Node)
		} else {
			training = append(training, in.Node)
		}
	}
	wantReports := []string{"eval-train[p=0.5,sampling=uniform]", "eval-train[p=0.5,sampling=weighted]", "eval-train[p=0.9,sampling=uniform]", "eval-train[p=0.9,sampling=weighted]"}
	if table.Stage != eval.StageTable || !slices.Equal(reports, wantReports) || len(training) != 4 || training[3] != "train[p=0.9,sampling=weighted]" {
		t.Errorf("table-dev reads reports %v, training %v", reports, training)
	}
	if p := nodeParams(t, g, "table-dev"); !slices.Equal(p["rows"].([]any), []any{"0.5", "0.9"}) || !slices.Equal(p["columns"].([]any), []any{"uniform", "weighted"}) {
		t.Errorf("table-dev params %v", p)
	}
}

// On distant labels the taggers read the train input, the complete input
// gives the missampling rate, and the table has one row per sampling.
func TestNegSampleDistant(t *testing.T) {
	dir := fixture(t)
	g, err := expand(t, dir, example(t, "conll03-negsample.yaml"), noOverlay, "sampling=weighted", "select=false")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"vectors", "train[sampling=weighted]", "eval-train[sampling=weighted]", "register[sampling=weighted]", "table-dev"}; !slices.Equal(ids(g), want) {
		t.Fatalf("nodes %v, want %v", ids(g), want)
	}
	tr, _ := g.Node("train[sampling=weighted]")
	var ports []string
	for _, in := range tr.Inputs {
		ports = append(ports, in.Port)
	}
	if slices.Sort(ports); !slices.Equal(ports, []string{"complete", "corpus", "embeddings"}) {
		t.Errorf("train reads %v, want complete, corpus and embeddings (no dev: select=false)", ports)
	}
	if p := nodeParams(t, g, tr.ID); p["corpus_labels"] != "train_label_dist.txt" || p["complete_labels"] != "train_label_true.txt" {
		t.Errorf("train params %v", p)
	}
	if p := nodeParams(t, g, "table-dev"); !slices.Equal(p["rows"].([]any), []any{"weighted"}) {
		t.Errorf("table-dev params %v", p)
	}
}

func TestNegSampleErrors(t *testing.T) {
	dir := fixture(t)
	for _, c := range []struct{ text, want string }{
		{"method: negsample\nparams:\n  mask: [0.5]\ninputs:\n  train: ../../data/raw.txt\n  gazetteers: [../../data/gaz/per.txt]\n",
			"m.yaml:3: params.mask: masks the train input's gold tags"},
		{"method: negsample\nparams:\n  sampling: []\ninputs: {train: ../../data/raw.txt}\n",
			"m.yaml:3: params.sampling: want at least one of"},
		{"method: negsample\nparams:\n  mask: [1.5]\ninputs: {train: ../../data/raw.txt}\n",
			"m.yaml:3: params.mask"},
		{"method: negsample\nparams:\n  mask: [0.5]\n  refine: on\ninputs: {train: ../../data/raw.txt}\n",
			"m.yaml:4: params.refine: refines distant labels, and mask trains on gold ones"},
	} {
		_, err := expand(t, dir, c.text)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("spec:\n%s\nerror %v\nwant %s", c.text, err, c.want)
		}
	}
}
