package engine

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nerflow/nerflow/stages"
)

// TestEarlyClaim: a root, and a node released by its only parent, claim
// their key in the start script's round trip; a task whose parents'
// outputs disagree with the recorded ones runs under the key of the
// recorded ones and lets the early claim go.
func TestEarlyClaim(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, rdb, _ := workerless(t)
	g := graphOf(t, `
nodes:
  a: {stage: test.emit, params: {text: A}}
  b: {stage: test.concat, inputs: {in: a}, params: {suffix: "!"}}
`)
	id, err := e.Submit(ctx, g, SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ri, err := e.info(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	w := e.NewWorker(WorkerOptions{Name: "w1", TempDir: t.TempDir()})
	a, _ := g.Node("a")
	b, _ := g.Node("b")
	k := runKeys(e.ns, id)

	// The root knows its key before starting.
	c := w.early(ri, id, a, payload{Run: id, Node: "a"})
	if c == nil || c.key != NodeKey(a, map[string][]stages.Artifact{}) {
		t.Fatalf("early claim of the root: %+v", c)
	}
	if err := w.execute(ctx, payload{Run: id, Node: "a"}); err != nil {
		t.Fatal(err)
	}
	h := rdb.HGetAll(ctx, k.node("a")).Val()
	if h["worker"] != "w1" || h["attempt"] != "0" || h["key"] == "" || h["outputs"] == "" {
		t.Errorf("a's hash after its execution: %v", h)
	}

	// b was released by its only parent: its task carries a's outputs.
	info, err := e.inspector.GetTaskInfo(e.queue(b.Queue), taskID(id, "b"))
	if err != nil {
		t.Fatal(err)
	}
	var p payload
	if err := json.Unmarshal(info.Payload, &p); err != nil {
		t.Fatal(err)
	}
	if string(p.Parents["a"]) != h["outputs"] {
		t.Fatalf("b's task carries %s, want a's outputs %s", p.Parents["a"], h["outputs"])
	}
	real := w.early(ri, id, b, p)
	if real == nil {
		t.Fatal("no early claim from a's outputs")
	}

	// A task whose hint names other outputs of a (valid, another digest).
	var outs map[string]stages.Artifact
	if err := json.Unmarshal(p.Parents["a"], &outs); err != nil {
		t.Fatal(err)
	}
	o := outs["out"]
	o.Meta = map[string]string{"other": "1"}
	o.Seal()
	outs["out"] = o
	stale, _ := json.Marshal(outs)
	p.Parents = map[string]json.RawMessage{"a": stale}
	wrong := w.early(ri, id, b, p)
	if wrong == nil || wrong.key == real.key {
		t.Fatalf("early claim from other outputs: %+v, want a key other than %s", wrong, real.key)
	}
	if err := w.execute(ctx, p); err != nil {
		t.Fatal(err)
	}
	if got := rdb.HGet(ctx, k.node("b"), "key").Val(); got != real.key {
		t.Errorf("b ran under key %s, want %s (from the recorded outputs)", Short(got), Short(real.key))
	}
	if _, err := e.NodeRecord(ctx, real.key); err != nil {
		t.Errorf("b's record: %v", err)
	}
	for h, _ := e.keyHolder(ctx, wrong.key); h != ""; h, _ = e.keyHolder(ctx, wrong.key) {
		if ctx.Err() != nil {
			t.Fatal("the early claim on the wrong key was never released")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st := rdb.HGet(ctx, k.meta(), "state").Val(); st != Succeeded {
		t.Errorf("run %s", st)
	}
}
