package engine

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/nerflow/nerflow/pipeline/spec"
	_ "github.com/nerflow/nerflow/pipeline/teststages"
	"github.com/nerflow/nerflow/storage"
	"github.com/nerflow/nerflow/storage/fsstore"
	"github.com/nerflow/nerflow/storage/layout"
)

func diamond(t *testing.T) *spec.Graph {
	t.Helper()
	return graphOf(t, `
nodes:
  a: {stage: test.emit}
  b: {stage: test.concat, inputs: {in: a}}
  c: {stage: test.concat, inputs: {in: a}}
  d: {stage: test.concat, inputs: {in: [b, c]}}
`)
}

// graphOf expands the spec text.
func graphOf(t *testing.T, text string) *spec.Graph {
	t.Helper()
	s, err := spec.Parse([]byte(text), "test.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	g, err := s.Expand()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// workerless starts an engine over miniredis with no worker, so that the
// test drives node completion by hand.
func workerless(t *testing.T) (*Engine, *redis.Client, storage.Store) {
	t.Helper()
	mr := miniredis.NewMiniRedis()
	mr.ClockTTL(true)
	if err := mr.Start(); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	st, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := New(rdb, st, WithLogger(slog.New(slog.DiscardHandler)))
	t.Cleanup(func() { e.Close(); rdb.Close(); mr.Close() })
	return e, rdb, st
}

// submitDiamond submits the diamond to a workerless engine.
func submitDiamond(t *testing.T) (*Engine, *redis.Client, *spec.Graph, string, *runInfo) {
	t.Helper()
	e, rdb, _ := workerless(t)
	g := diamond(t)
	id, err := e.Submit(context.Background(), g, SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ri, err := e.info(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return e, rdb, g, id, ri
}

// TestCompleteIsIdempotent: completing a node twice (a handler that ran
// twice, or was retried after dying between the state change and the
// enqueue) releases its children once and enqueues each once.
func TestCompleteIsIdempotent(t *testing.T) {
	ctx := context.Background()
	e, rdb, g, id, ri := submitDiamond(t)
	k := runKeys(e.ns, id)
	node := func(n string) *spec.Node { x, _ := g.Node(n); return x }
	pending := func() []string {
		tasks, err := e.inspector.ListPendingTasks(e.queue("cpu"))
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, t := range tasks {
			ids = append(ids, t.ID)
		}
		return ids
	}
	if got := pending(); len(got) != 1 || got[0] != id+"/a" {
		t.Fatalf("after submit, pending tasks %v", got)
	}
	// The worker takes a's task: drop it from the queue.
	if err := e.inspector.DeleteTask(e.queue("cpu"), id+"/a"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := e.complete(ctx, id, ri, node("a"), Done, nil); err != nil {
			t.Fatal(err)
		}
	}
	waiting := rdb.HGetAll(ctx, k.waiting()).Val()
	states := rdb.HGetAll(ctx, k.states()).Val()
	if waiting["b"] != "0" || waiting["c"] != "0" || waiting["d"] != "2" {
		t.Errorf("waiting counters %v: a's completion counted more than once", waiting)
	}
	if states["a"] != Done || states["b"] != Queued || states["c"] != Queued || states["d"] != Pending {
		t.Errorf("states %v", states)
	}
	if got := strings.Join(pending(), " "); got != id+"/b "+id+"/c" && got != id+"/c "+id+"/b" {
		t.Errorf("pending tasks %q, want b and c once each", got)
	}
	// b finishes, twice; d still waits for c.
	for range 2 {
		if err := e.complete(ctx, id, ri, node("b"), Done, nil); err != nil {
			t.Fatal(err)
		}
	}
	if w := rdb.HGet(ctx, k.waiting(), "d").Val(); w != "1" {
		t.Errorf("d waits for %s parents, want 1", w)
	}
	for _, n := range []string{"c", "d"} {
		if err := e.complete(ctx, id, ri, node(n), Done, nil); err != nil {
			t.Fatal(err)
		}
	}
	if st := rdb.HGet(ctx, k.meta(), "state").Val(); st != Succeeded {
		t.Errorf("run is %s after every node completed", st)
	}
	if n := rdb.HGet(ctx, k.meta(), "unfinished").Val(); n != "0" {
		t.Errorf("unfinished = %s", n)
	}
	// A completed run enqueues nothing more, whatever is completed again.
	before := len(pending())
	if err := e.complete(ctx, id, ri, node("a"), Done, nil); err != nil {
		t.Fatal(err)
	}
	if len(pending()) != before {
		t.Error("completing a node of a finished run enqueued tasks")
	}
}

// TestFailCancelsPending: failing a node fails the run once and cancels
// every node that has not started.
func TestFailCancelsPending(t *testing.T) {
	ctx := context.Background()
	e, rdb, _ := workerless(t)
	g := diamond(t)
	id, err := e.Submit(ctx, g, SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	k := runKeys(e.ns, id)
	for _, n := range []string{"a"} {
		nd, _ := g.Node(n)
		if s, _, _, _ := e.start(ctx, id, nd, nil, nil); s != Running {
			t.Fatalf("start %s: %s", n, s)
		}
	}
	r, err := failScript.Run(ctx, rdb, []string{k.states(), k.meta()}, "a", nowString(), "node a: boom").Int()
	if err != nil || r != 1 {
		t.Fatalf("fail: %d, %v", r, err)
	}
	if r, _ := failScript.Run(ctx, rdb, []string{k.states(), k.meta()}, "a", nowString(), "again").Int(); r != 0 {
		t.Error("failing twice failed the run twice")
	}
	states := rdb.HGetAll(ctx, k.states()).Val()
	if states["a"] != Failed || states["b"] != Cancelled || states["d"] != Cancelled {
		t.Errorf("states %v", states)
	}
	meta := rdb.HGetAll(ctx, k.meta()).Val()
	if meta["state"] != Failed || meta["error"] != "node a: boom" {
		t.Errorf("run %s: %q", meta["state"], meta["error"])
	}
	// A task of a cancelled node that still runs does nothing.
	b, _ := g.Node("b")
	if s, _, _, _ := e.start(ctx, id, b, nil, nil); s != Failed {
		t.Errorf("starting b in a failed run: %s", s)
	}
}

// TestDamagedRecordIsACacheMiss: a node record that does not decode (or
// belongs to another key) is not trusted.
func TestDamagedRecordIsACacheMiss(t *testing.T) {
	ctx := context.Background()
	e, _, st := workerless(t)
	if _, err := storage.PutBytes(ctx, st, layout.NodeRecord("abc"), []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.NodeRecord(ctx, "abc"); err == nil || !strings.Contains(err.Error(), "damaged node record") {
		t.Errorf("err = %v", err)
	}
	if _, err := storage.PutBytes(ctx, st, layout.NodeRecord("def"), []byte(`{"key":"abc","outputs":{}}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.NodeRecord(ctx, "def"); err == nil {
		t.Error("a record of another key was accepted")
	}
	// Outputs of an older manifest format (no format version: the digest
	// was computed differently) are not trusted either.
	d := storage.Digest([]byte("x"))
	old := `{"key":"ghi","outputs":{"o":{"digest":"` + d + `","prefix":"artifacts/ghi/1/o","files":[{"name":"x","size":1,"digest":"` + d + `"}],"producer":{"stage":"s"}}}}`
	if _, err := storage.PutBytes(ctx, st, layout.NodeRecord("ghi"), []byte(old)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.NodeRecord(ctx, "ghi"); !errors.Is(err, errBadRecord) || !strings.Contains(err.Error(), "output o: invalid artifact manifest: no format version") {
		t.Errorf("record of an older format: %v", err)
	}
}

// TestRetryScript: a retry queues the failed and cancelled nodes whose
// parents are finished, leaves the others pending with their counters of
// unfinished parents, keeps finished nodes, and refuses a running run.
func TestRetryScript(t *testing.T) {
	ctx := context.Background()
	e, rdb, g, id, ri := submitDiamond(t)
	a, _ := g.Node("a")
	if err := e.complete(ctx, id, ri, a, Done, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	b, _ := g.Node("b")
	if s, _, _, err := e.start(ctx, id, b, nil, nil); s != Running || err != nil {
		t.Fatalf("start b: %s, %v", s, err)
	}
	k := runKeys(e.ns, id)
	rdb.HSet(ctx, k.node("b"), "error", "boom", "progress", "{}")
	if r, err := failScript.Run(ctx, rdb, []string{k.states(), k.meta()}, "b", nowString(), "node b: boom").Int(); r != 1 || err != nil {
		t.Fatalf("fail b: %d, %v", r, err)
	}
	n, err := e.Retry(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Errorf("retry re-runs %d nodes, want 3 (b failed, c and d cancelled)", n)
	}
	states := rdb.HGetAll(ctx, k.states()).Val()
	want := map[string]string{"a": Done, "b": Queued, "c": Queued, "d": Pending}
	for node, s := range want {
		if states[node] != s {
			t.Errorf("%s is %s, want %s", node, states[node], s)
		}
	}
	if w := rdb.HGet(ctx, k.waiting(), "d").Val(); w != "2" {
		t.Errorf("d waits for %s parents, want 2", w)
	}
	meta := rdb.HGetAll(ctx, k.meta()).Val()
	if meta["state"] != Running || meta["error"] != "" || meta["unfinished"] != "3" {
		t.Errorf("run after retry: %v", meta)
	}
	if h := rdb.HGetAll(ctx, k.node("b")).Val(); h["error"] != "" || h["progress"] != "" {
		t.Errorf("b keeps its last attempt's error or progress: %v", h)
	}
	if _, err := e.Retry(ctx, id); err == nil || !strings.Contains(err.Error(), "is running: nothing to retry") {
		t.Errorf("retrying a running run: %v", err)
	}
}
