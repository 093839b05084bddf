package spec_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/pipeline/spec"
	_ "github.com/nerflow/nerflow/pipeline/teststages"
)

func expand(t *testing.T, text string, overrides ...string) (*spec.Graph, error) {
	t.Helper()
	s, err := spec.Parse([]byte(text), "p.yaml", t.TempDir(), overrides...)
	if err != nil {
		return nil, err
	}
	return s.Expand()
}

func ids(g *spec.Graph) []string {
	out := make([]string, len(g.Nodes))
	for i, n := range g.Nodes {
		out[i] = n.ID
	}
	return out
}

func TestFanOutExpansion(t *testing.T) {
	g, err := expand(t, `
name: grid
nodes:
  text: {stage: test.emit}
  train:
    stage: test.seed
    fan_out: {seed: [1, 2], scale: [0.5, 2]}
    inputs: {in: text.out}
  eval:                       # one per seed: matched to the train nodes of that seed
    stage: test.sum
    fan_out: {seed: [1, 2]}
    inputs: {models: train}
  total: {stage: test.sum, inputs: {models: train.model}}
`)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"text", "train[scale=0.5,seed=1]", "train[scale=0.5,seed=2]", "train[scale=2,seed=1]", "train[scale=2,seed=2]",
		"eval[seed=1]", "eval[seed=2]", "total"}
	if got := ids(g); !slices.Equal(got, want) {
		t.Fatalf("nodes = %v\nwant    %v", got, want)
	}
	n, _ := g.Node("train[scale=2,seed=1]")
	var p map[string]any
	if err := json.Unmarshal(n.Params, &p); err != nil {
		t.Fatal(err)
	}
	if p["seed"] != 1.0 || p["scale"] != 2.0 {
		t.Errorf("params of %s = %s", n.ID, n.Params)
	}
	if !slices.Equal(n.Parents, []string{"text"}) || !slices.Equal(n.Children, []string{"eval[seed=1]", "total"}) {
		t.Errorf("%s: parents %v children %v", n.ID, n.Parents, n.Children)
	}
	e, _ := g.Node("eval[seed=2]")
	if !slices.Equal(e.Parents, []string{"train[scale=0.5,seed=2]", "train[scale=2,seed=2]"}) {
		t.Errorf("eval[seed=2] parents = %v", e.Parents)
	}
	tot, _ := g.Node("total")
	if len(tot.Inputs) != 4 || len(tot.Parents) != 4 {
		t.Errorf("total has %d inputs from %d parents, want 4 and 4", len(tot.Inputs), len(tot.Parents))
	}
	if e.Queue != "cpu" || e.MaxRetries != 2 {
		t.Errorf("eval: queue %s retries %d", e.Queue, e.MaxRetries)
	}
}

func TestOverrides(t *testing.T) {
	g, err := expand(t, `
nodes:
  text: {stage: test.emit}
  train: {stage: test.seed, fan_out: {seed: [1, 2]}, inputs: {in: text}}
`, "text.text=hi", "train.fan_out.seed=7,8,9", "train.queue=gpu", "train.scale=0.25")
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(g); !slices.Equal(got, []string{"text", "train[seed=7]", "train[seed=8]", "train[seed=9]"}) {
		t.Errorf("nodes = %v", got)
	}
	n, _ := g.Node("train[seed=8]")
	if n.Queue != "gpu" || string(n.Params) != `{"scale":0.25,"seed":8}` {
		t.Errorf("train[seed=8]: queue %s params %s", n.Queue, n.Params)
	}
	txt, _ := g.Node("text")
	if string(txt.Params) != `{"text":"hi"}` {
		t.Errorf("text params %s", txt.Params)
	}
}

// TestValidation checks that each kind of mistake is reported with the
// file, line and field at fault.
func TestValidation(t *testing.T) {
	cases := []struct {
		name, spec string
		overrides  []string
		want       []string
	}{
		{"unknown stage", `
nodes:
  a: {stage: test.emti}
`, nil, []string{`p.yaml:3: nodes.a.stage: unknown stage "test.emti"`}},
		{"unknown param", `
nodes:
  a:
    stage: test.emit
    params:
      txt: hi
`, nil, []string{`p.yaml:6: nodes.a.params.txt: stage test.emit has no such parameter (it has: text)`}},
		{"mistyped param", `
nodes:
  a: {stage: test.emit}
  b:
    stage: test.seed
    params: {scale: fast}
    inputs: {in: a}
`, nil, []string{`p.yaml:6: nodes.b.params.scale: want a number, got "fast"`}},
		{"out of range", `
nodes:
  a: {stage: test.slow, params: {steps: 0}}
`, nil, []string{`p.yaml:3: nodes.a.params.steps: 0 is below the minimum 1`}},
		{"mistyped override", `
nodes:
  a: {stage: test.slow}
`, []string{"a.steps=ten"}, []string{`--set a.steps=ten: nodes.a.params.steps: want an integer, got "ten"`}},
		{"missing input", `
nodes:
  s: {stage: test.sum}
`, nil, []string{`p.yaml:3: nodes.s: input "models" of stage test.sum is not connected`}},
		{"unknown node", `
nodes:
  s: {stage: test.sum, inputs: {models: trian.model}}
`, nil, []string{`p.yaml:3: nodes.s.inputs.models: "trian.model" is not a node`}},
		{"unknown output", `
nodes:
  a: {stage: test.emit}
  s:
    stage: test.concat
    inputs:
      in: a.model
`, nil, []string{`p.yaml:7: nodes.s.inputs.in: node a (stage test.emit) has no output "model" (outputs: out)`}},
		{"unknown port", `
nodes:
  a: {stage: test.emit}
  s:
    stage: test.concat
    inputs: {in: a, extra: a}
`, nil, []string{`p.yaml:6: nodes.s.inputs.extra: stage test.concat has no input "extra"`}},
		{"missing dataset", `
nodes:
  s: {stage: test.concat, inputs: {in: ./nowhere.txt}}
`, nil, []string{`nodes.s.inputs.in: dataset ./nowhere.txt: no such file or directory`}},
		{"cycle", `
nodes:
  a: {stage: test.concat, inputs: {in: c}}
  b: {stage: test.concat, inputs: {in: a}}
  c: {stage: test.concat, inputs: {in: b}}
`, nil, []string{`nodes.a.inputs: cycle: a -> c -> b -> a`}},
		{"fan-in into a single input", `
nodes:
  a: {stage: test.emit}
  t: {stage: test.seed, fan_out: {seed: [1, 2, 3]}, inputs: {in: a}}
  f:
    stage: test.flaky
    inputs: {in: t}
`, nil, []string{`p.yaml:7: nodes.f.inputs.in: fan-in mismatch: t fans out into 3 nodes over seed, but input in of stage test.flaky takes one artifact`}},
		{"empty fan-out", `
nodes:
  u: {stage: test.seed, fan_out: {seed: []}}
`, nil, []string{`p.yaml:3: nodes.u.fan_out.seed: want a non-empty list`}},
		{"fan-out over an undeclared param", `
nodes:
  t: {stage: test.seed, fan_out: {seed: [1, 2, 3]}}
  s:
    stage: test.sum
    fan_out:
      seed: [1, 2]
    inputs: {models: u}
  u: {stage: test.emit}
`, nil, []string{`p.yaml:7: nodes.s.fan_out.seed: stage test.sum has no parameter "seed", and none of its inputs fans out over it`}},
		{"fan-out over a param set twice", `
nodes:
  t: {stage: test.seed, params: {seed: 4}, fan_out: {seed: [1, 2]}}
`, nil, []string{`p.yaml:3: nodes.t.params.seed: is also fanned out`}},
		{"unknown field", `
nodes:
  t: {stage: test.emit, parms: {text: x}}
`, nil, []string{`p.yaml:3: nodes.t.parms: unknown field`}},
		{"bad queue", `
nodes:
  t: {stage: test.emit, queue: tpu}
`, nil, []string{`p.yaml:3: nodes.t.queue: tpu is not cpu or gpu`}},
		{"several errors", `
nodes:
  a: {stage: nope}
  b: {stage: test.emit, params: {text: [1]}}
`, nil, []string{`p.yaml:3: nodes.a.stage: unknown stage "nope"`, `p.yaml:4: nodes.b.params.text: want a string, got a list`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := expand(t, c.spec, c.overrides...)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n  %v\ndoes not contain\n  %s", err, w)
				}
			}
		})
	}
}

// TestSharedFanOutValuesMustMatch: a consumer fanned out over the same key
// as its producer pairs copies by value, so the values must agree.
func TestSharedFanOutValuesMustMatch(t *testing.T) {
	_, err := expand(t, `
nodes:
  t: {stage: test.seed, fan_out: {seed: [1, 2, 3]}}
  u:
    stage: test.seed
    fan_out:
      seed: [1, 2]
    inputs: {in: t}
`)
	if err == nil || !strings.Contains(err.Error(), "p.yaml:7: nodes.u.fan_out.seed: fan-in mismatch: u fans out over seed = [1, 2] but t over seed = [1, 2, 3]") {
		t.Errorf("err = %v", err)
	}
}

func TestDatasetPathsAreRelativeToTheSpec(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "data.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(p, []byte("nodes:\n  c: {stage: test.concat, inputs: {in: [./data.txt, s3://bucket/key.txt]}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := spec.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	g, err := s.Expand()
	if err != nil {
		t.Fatal(err)
	}
	if got := g.Datasets(); !slices.Equal(got, []string{filepath.Join(dir, "data.txt"), "s3://bucket/key.txt"}) {
		t.Errorf("datasets = %v", got)
	}
	if g.Name != "p" {
		t.Errorf("name = %q, want the file name", g.Name)
	}
}

// TestEveryProblemAtOnce: a spec with several bad parameters and a bad
// input is reported in one round, each problem at its own line.
func TestEveryProblemAtOnce(t *testing.T) {
	_, err := expand(t, `
nodes:
  text: {stage: test.emit}
  train:
    stage: test.seed
    params:
      seed: -3
      scale: lots
      colour: red
    inputs: {in: nowhere.out}
`)
	var errs spec.Errors
	if !errorsAs(err, &errs) {
		t.Fatalf("want spec.Errors, got %v", err)
	}
	msg := err.Error()
	for _, want := range []string{"p.yaml:7: nodes.train.params.seed", "p.yaml:8: nodes.train.params.scale", "p.yaml:9: nodes.train.params.colour", "p.yaml:10: nodes.train.inputs"} {
		if !strings.Contains(msg, want) {
			t.Errorf("errors do not include %q:\n%s", want, msg)
		}
	}
}

// TestYAMLSyntaxErrorLine: yaml.v3 names the line where the enclosing
// mapping began; the error must name the line that broke the file.
func TestYAMLSyntaxErrorLine(t *testing.T) {
	_, err := spec.Parse([]byte(`name: demo
nodes:
  text:
    stage: test.emit
    params:
      text: hi
     bad: 1
  other: {stage: test.emit}
`), "p.yaml", t.TempDir())
	if err == nil || !strings.HasPrefix(err.Error(), "p.yaml:7: YAML syntax:") {
		t.Fatalf("got %v, want an error at p.yaml:7", err)
	}
}

func errorsAs(err error, target *spec.Errors) bool {
	es, ok := err.(spec.Errors)
	if ok {
		*target = es
	}
	return ok
}
