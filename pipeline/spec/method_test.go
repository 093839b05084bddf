package spec_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/stages"
)

// ens is a small method with the shape of RoSTER's: K seeds on the gpu
// queue, an optional input that adds a node, and an ablation parameter that
// rewires the end of the graph.
func init() {
	spec.RegisterMethod(spec.Method{
		Name: "ens",
		Doc:  "Test method: K seeded models, averaged or scored one by one.",
		Params: []stages.Param{
			stages.IntParam("k", 3, "seeds", stages.Range(1, 10)),
			stages.BoolParam("ensemble", true, "sum the models (else one sum per seed)"),
			stages.StringParam("sep", "+", "separator of the joined texts", stages.OneOf("+", "-")),
		},
		Inputs: []stages.Port{
			{Name: "text", Kind: "text", Doc: "the text"},
			{Name: "extra", Kind: "text", Optional: true, Many: true, Doc: "more texts, joined to it"},
		},
		Build: func(b *spec.Builder) error {
			src := b.In("text")
			if b.Has("extra") {
				src = b.Node("join", "test.concat").PassAs("sep", "sep").Input("in", b.In("text"), b.In("extra")).Out("out")
			}
			seeds := make([]any, b.Params().Int("k"))
			for i := range seeds {
				seeds[i] = i + 1
			}
			// A fan-out replaces the value the method set before it.
			tr := b.Node("train", "test.seed").Set("seed", 0).Queue("gpu").FanOut("seed", seeds...).Input("in", src)
			if b.Params().Bool("ensemble") {
				b.Node("ensemble", "test.sum").Input("models", tr.Out("model"))
			} else {
				b.Node("eval", "test.sum").FanOut("seed", seeds...).Input("models", tr.Out("model"))
			}
			return nil
		},
	})
}

// buggy misuses the builder: its mistakes are reported at the method line.
func init() {
	spec.RegisterMethod(spec.Method{
		Name:   "buggy",
		Params: []stages.Param{stages.IntParam("k", 1, "k")},
		Inputs: []stages.Port{{Name: "text", Kind: "text", Optional: true}},
		Build: func(b *spec.Builder) error {
			e := b.Node("emit", "test.emit").PassAs("text", "txt")
			b.Node("emit", "test.emit")
			b.Node("sum", "test.sum").Input("models", e.Out("out"), b.In("texts"))
			return nil
		},
	})
}

// call parses and expands a method call in a directory holding a.txt and
// b.txt.
func call(t *testing.T, text string, sets ...string) (*spec.Spec, *spec.Graph, error) {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"a.txt", "b.txt"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, err := spec.Parse([]byte(text), "p.yaml", dir, sets...)
	if err != nil {
		return nil, nil, err
	}
	g, err := s.Expand()
	return s, g, err
}

func params(t *testing.T, g *spec.Graph, id string) map[string]any {
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

func TestMethodExpansion(t *testing.T) {
	_, g, err := call(t, `
name: demo
method: ens
params: {k: 2}
inputs: {text: ./a.txt}
`)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"train[seed=1]", "train[seed=2]", "ensemble"}; !slices.Equal(ids(g), want) {
		t.Fatalf("nodes = %v, want %v", ids(g), want)
	}
	tr, _ := g.Node("train[seed=2]")
	if tr.Stage != "test.seed" || tr.Queue != "gpu" || len(tr.Inputs) != 1 || filepath.Base(tr.Inputs[0].Dataset) != "a.txt" {
		t.Errorf("train[seed=2] = %+v", tr)
	}
	if p := params(t, g, "train[seed=2]"); p["seed"] != 2.0 {
		t.Errorf("train[seed=2] params %v", p)
	}
	ens, _ := g.Node("ensemble")
	if !slices.Equal(ens.Parents, []string{"train[seed=1]", "train[seed=2]"}) || ens.Queue != "cpu" {
		t.Errorf("ensemble: parents %v queue %s", ens.Parents, ens.Queue)
	}

	// The optional input adds a node; the ablation parameter rewires the end.
	_, g, err = call(t, `
method: ens
params: {k: 2, ensemble: false, sep: "-"}
inputs: {text: ./a.txt, extra: [./b.txt, ./a.txt]}
`)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"join", "train[seed=1]", "train[seed=2]", "eval[seed=1]", "eval[seed=2]"}; !slices.Equal(ids(g), want) {
		t.Fatalf("nodes = %v, want %v", ids(g), want)
	}
	j, _ := g.Node("join")
	if len(j.Inputs) != 2 || filepath.Base(j.Inputs[1].Dataset) != "b.txt" {
		t.Errorf("join reads %+v: want a.txt, b.txt (the repeated a.txt once)", j.Inputs)
	}
	if p := params(t, g, "join"); p["sep"] != "-" {
		t.Errorf("join params %v", p)
	}
	if e, _ := g.Node("eval[seed=2]"); !slices.Equal(e.Parents, []string{"train[seed=2]"}) {
		t.Errorf("eval[seed=2] parents %v", e.Parents)
	}
	if tr, _ := g.Node("train[seed=1]"); tr.Inputs[0].Node != "join" {
		t.Errorf("train reads %+v, want join.out", tr.Inputs)
	}
}

func TestMethodOverridesAndSet(t *testing.T) {
	text := `
method: ens
params: {k: 2}
inputs: {text: ./a.txt}
overrides:
  train: {scale: 3, retries: 5}
  ensemble: {queue: gpu}
`
	_, g, err := call(t, strings.Replace(text, "  ensemble: {queue: gpu}\n", "", 1), "ensemble=false", "train.scale=4", "k=3")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"train[seed=1]", "train[seed=2]", "train[seed=3]", "eval[seed=1]", "eval[seed=2]", "eval[seed=3]"}; !slices.Equal(ids(g), want) {
		t.Fatalf("nodes = %v, want %v", ids(g), want)
	}
	tr, _ := g.Node("train[seed=3]")
	if p := params(t, g, tr.ID); p["scale"] != 4.0 || tr.MaxRetries != 5 {
		t.Errorf("train[seed=3]: params %v retries %d: want scale 4 from --set, 5 retries from overrides", p, tr.MaxRetries)
	}

	// Without the --set, the overrides apply; an override's fan_out replaces
	// the method's.
	_, g, err = call(t, text, "train.fan_out.seed=7,8")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"train[seed=7]", "train[seed=8]", "ensemble"}; !slices.Equal(ids(g), want) {
		t.Fatalf("nodes = %v, want %v", ids(g), want)
	}
	if p := params(t, g, "train[seed=8]"); p["scale"] != 3.0 || p["seed"] != 8.0 {
		t.Errorf("train[seed=8] params %v", p)
	}
	if e, _ := g.Node("ensemble"); e.Queue != "gpu" {
		t.Errorf("ensemble queue %s, want gpu from overrides", e.Queue)
	}

	// A method call may add nodes of its own, reading the method's.
	_, g, err = call(t, text+`nodes:
  total: {stage: test.sum, inputs: {models: train.model}}
`, "total.queue=gpu")
	if err != nil {
		t.Fatal(err)
	}
	if tot, _ := g.Node("total"); len(tot.Parents) != 2 || tot.Queue != "gpu" {
		t.Errorf("total: %+v", tot)
	}
}

// Every error of a method call names the line of the user's file (or the
// --set) at fault.
func TestMethodErrorPositions(t *testing.T) {
	cases := []struct {
		name, text string
		sets       []string
		want       string
	}{
		{"bad param", "method: ens\nparams:\n  k: 20\ninputs: {text: ./a.txt}\n", nil,
			"p.yaml:3: params.k: 20 is above the maximum 10"},
		{"unknown param", "method: ens\nparams:\n  k: 2\n  kk: 2\ninputs: {text: ./a.txt}\n", nil,
			"p.yaml:4: params.kk: method ens has no such parameter"},
		{"enum", "method: ens\nparams: {sep: '*'}\ninputs: {text: ./a.txt}\n", nil,
			`p.yaml:2: params.sep: "*" is not one of +, -`},
		{"unknown input", "method: ens\ninputs:\n  text: ./a.txt\n  txt: ./b.txt\n", nil,
			`p.yaml:4: inputs.txt: method ens has no input "txt" (inputs: text, extra)`},
		{"missing input", "name: x\nmethod: ens\ninputs:\n  extra: [./a.txt]\n", nil,
			"p.yaml:3: inputs: input text of method ens is not connected"},
		{"empty fan-out override", "method: ens\nparams:\n  k: 1\ninputs: {text: ./a.txt}\noverrides: {train: {fan_out: {seed: []}}}\n", nil,
			"p.yaml:5: overrides.train.fan_out.seed: want a non-empty list of values"},
		{"missing dataset", "method: ens\ninputs:\n  text: ./nope.txt\n", nil,
			"p.yaml:3: inputs.text: dataset ./nope.txt: no such file or directory"},
		{"list for one", "method: ens\ninputs:\n  text: [./a.txt]\n", nil,
			"p.yaml:3: inputs.text: input text of method ens takes one reference, got a list"},
		{"unknown method", "\nmethod: roster2\n", nil, `p.yaml:2: method: unknown method "roster2" (methods: buggy, ens;`},
		{"override unknown node", "method: ens\ninputs: {text: ./a.txt}\noverrides:\n  trian: {scale: 2}\n", nil,
			`p.yaml:4: overrides.trian: method ens makes no node "trian" (it makes: train, ensemble)`},
		{"override bad value", "method: ens\ninputs: {text: ./a.txt}\noverrides:\n  train:\n    scale: many\n", nil,
			`p.yaml:5: overrides.train.scale: want a number, got "many"`},
		{"override unknown param", "method: ens\ninputs: {text: ./a.txt}\noverrides:\n  train:\n    hidden: 3\n", nil,
			"p.yaml:5: overrides.train.hidden: stage test.seed has no such parameter"},
		{"override inputs", "method: ens\ninputs: {text: ./a.txt}\noverrides:\n  train:\n    inputs: {in: x}\n", nil,
			"p.yaml:5: overrides.train.inputs: an override sets parameters"},
		{"override bad queue", "method: ens\ninputs: {text: ./a.txt}\noverrides:\n  train:\n    queue: tpu\n", nil,
			"p.yaml:5: overrides.train.queue: tpu is not cpu or gpu"},
		{"set method param", "method: ens\ninputs: {text: ./a.txt}\n", []string{"k=0"},
			"--set k=0: params.k: 0 is below the minimum 1"},
		{"set node param", "method: ens\ninputs: {text: ./a.txt}\n", []string{"train.scale=x"},
			`--set train.scale=x: overrides.train.scale: want a number, got "x"`},
		{"set a fanned-out param", "method: ens\ninputs: {text: ./a.txt}\n", []string{"train.seed=9"},
			"--set train.seed=9: overrides.train.seed: is also fanned out"},
		{"set with a params prefix", "method: ens\ninputs: {text: ./a.txt}\n", []string{"params.k=3"},
			"--set params.k=3: a method parameter is set without a prefix: --set k=3"},
		{"set on a node list", "nodes:\n  a: {stage: test.emit}\n", []string{"k=3"},
			"--set k=3: k=... sets a method parameter, but this spec calls no method"},
		{"params without method", "params: {k: 2}\nnodes:\n  a: {stage: test.emit}\n", nil,
			"p.yaml:1: params: only a method call has params"},
		{"node clashes", "method: ens\ninputs: {text: ./a.txt}\nnodes:\n  train: {stage: test.emit}\n", nil,
			"p.yaml:4: nodes.train: method ens makes a node train already"},
		{"method bugs", "name: x\nmethod: buggy\n", nil,
			"p.yaml:2: method: method buggy (a bug in the method): passes parameter \"txt\", which it does not declare\n" +
				"p.yaml:2: method: method buggy (a bug in the method): makes the node emit twice\n" +
				"p.yaml:2: method: method buggy (a bug in the method): reads input \"texts\", which it does not declare (inputs: text)\n" +
				"p.yaml:2: method: method buggy (a bug in the method): connects emit.out (a text) to input models of node sum, which takes a checkpoint"},
		{"cycle", "method: ens\ninputs:\n  text: loop.out\nnodes:\n  loop: {stage: test.concat, inputs: {in: ensemble.total}}\n", nil,
			"cycle: "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := call(t, c.text, c.sets...)
			if err == nil {
				t.Fatalf("no error, want %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error:\n%v\nwant it to contain\n%s", err, c.want)
			}
		})
	}
}

// What expand prints is a spec whose graph is the method call's.
func TestExpandYAMLRoundTrip(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"a.txt", "b.txt"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, text := range []string{
		"method: ens\ninputs: {text: ./a.txt, extra: [./b.txt]}\noverrides:\n  train: {scale: 0.25, timeout: 90m, retries: 0}\n",
		"name: abl\nmethod: ens\nparams: {ensemble: false, k: 4}\ninputs: {text: ./a.txt}\nnodes:\n  total: {stage: test.sum, inputs: {models: [train.model]}}\n",
	} {
		s, err := spec.Parse([]byte(text), "p.yaml", dir, "sep=-")
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
		s2, err := spec.Parse(y, "expanded.yaml", dir)
		if err != nil {
			t.Fatalf("%v\n%s", err, y)
		}
		if s2.Method != "" {
			t.Errorf("expanded spec calls method %q, want a node list", s2.Method)
		}
		g2, err := s2.Expand()
		if err != nil {
			t.Fatalf("%v\n%s", err, y)
		}
		a, _ := json.Marshal(g)
		b, _ := json.Marshal(g2)
		if string(a) != string(b) {
			t.Errorf("graphs differ:\n%s\n%s\nexpanded YAML:\n%s", a, b, y)
		}
	}
}

func TestGraphTree(t *testing.T) {
	_, g, err := call(t, "name: demo\nmethod: ens\nparams: {k: 2}\ninputs: {text: ./a.txt, extra: [./b.txt]}\n")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(g.Tree()), "\n")
	var got []string
	for _, l := range lines {
		f := strings.Fields(l)
		got = append(got, strings.Repeat(" ", len(l)-len(strings.TrimLeft(l, " ")))+f[0])
	}
	want := []string{"demo", "  join", "    train[seed=1]", "    train[seed=2]", "      ensemble"}
	if !slices.Equal(got, want) {
		t.Errorf("tree:\n%s\nwant the shape %q", g.Tree(), want)
	}
	if !strings.Contains(g.Tree(), "ensemble  test.sum  cpu  (models<-train[seed=1].model, models<-train[seed=2].model)") {
		t.Errorf("tree:\n%s", g.Tree())
	}
}
