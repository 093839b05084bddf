package engine_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nerflow/nerflow/internal/testenv"
	"github.com/nerflow/nerflow/pipeline/engine"
	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/pipeline/teststages"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/storage"
	"github.com/nerflow/nerflow/storage/artifact"
	"github.com/nerflow/nerflow/storage/fsstore"
	"github.com/nerflow/nerflow/storage/s3store"
)

// cluster is what the behaviour tests need: an engine to submit to, and
// workers executing nodes. Each test runs against the embedded engine
// (miniredis, file store) and against real Redis and MinIO with separate
// engines and workers per "process".
type cluster struct {
	submit *engine.Engine
	store  storage.Store
	// bucket is the MinIO bucket of the store, "" for a file store.
	bucket string
}

const (
	diamondSpec = `
name: diamond
nodes:
  a: {stage: test.emit, params: {text: A}}
  b: {stage: test.concat, inputs: {in: a.out}, params: {suffix: b}}
  c: {stage: test.concat, inputs: {in: a}, params: {suffix: c}}
  d: {stage: test.concat, inputs: {in: [b.out, c.out]}, params: {sep: "|"}}
`
	fanSpec = `
name: fan
nodes:
  text: {stage: test.emit, params: {text: abc}}
  train:
    stage: test.seed
    fan_out: {seed: [1, 2, 3, 4, 5]}
    params: {scale: 10}
    inputs: {in: text.out}
  total: {stage: test.sum, inputs: {models: train.model}}
`
)

var quiet = slog.New(slog.DiscardHandler)

func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("NERFLOW_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return quiet
}

func fastWorker() engine.WorkerOptions {
	return engine.WorkerOptions{
		Concurrency:         4,
		RetryDelay:          func(int) time.Duration { return 10 * time.Millisecond },
		DelayedPollInterval: 100 * time.Millisecond,
		ProgressInterval:    50 * time.Millisecond,
		ShutdownTimeout:     2 * time.Second,
	}
}

func embedded(t *testing.T) *cluster {
	t.Helper()
	st, err := fsstore.Open(storeDir(t))
	if err != nil {
		t.Fatal(err)
	}
	return embeddedOn(t, st, fastWorker())
}

// embeddedOn is an embedded engine on store st, its worker configured by o.
func embeddedOn(t *testing.T, st storage.Store, o engine.WorkerOptions) *cluster {
	t.Helper()
	em, err := engine.StartEmbedded(st, o, engine.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { em.Close() })
	return &cluster{submit: em.Engine, store: st}
}

// storeDir is a temporary directory for a file store, removed after the
// test. Not t.TempDir: a node cancelled at the end of a test may still be
// unwinding (and writing its attempt's files) when the workers' shutdown
// timeout has passed on a loaded machine, and t.TempDir's single RemoveAll
// then fails the test with "directory not empty". This one retries.
func storeDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "nerflow-engine-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		deadline := time.Now().Add(30 * time.Second)
		for {
			err := os.RemoveAll(dir)
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("removing the store: %v", err)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	return dir
}

func randomName(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// s3Store opens a fresh bucket on the test MinIO server.
func s3Store(t *testing.T) (storage.Store, string) {
	t.Helper()
	cfg := testenv.S3(t)
	bucket := randomName("nftest-")
	u := "s3://" + bucket + "/runs?endpoint=" + cfg.Endpoint + "&access_key=" + cfg.AccessKey + "&secret_key=" + cfg.SecretKey + "&secure=false"
	st, err := storage.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, u
}

var _ = s3store.Scheme

// distributed is the cluster path: real Redis, MinIO, a submitting engine
// and two workers, each with its own Redis client and store connection as
// separate processes would have, in a namespace of their own.
func distributed(t *testing.T) *cluster {
	t.Helper()
	addr := testenv.Redis(t)
	ns := randomName("nftest-")
	st, url := s3Store(t)
	newEngine := func() *engine.Engine {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		s, err := storage.Open(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		e := engine.New(rdb, s, engine.WithNamespace(ns), engine.WithLogger(testLogger(t)))
		t.Cleanup(func() { e.Close(); s.Close(); rdb.Close() })
		return e
	}
	sub := newEngine()
	for i, qs := range [][]string{{"cpu"}, {"gpu", "cpu"}} {
		o := fastWorker()
		o.Queues = qs
		o.Name = "worker-" + string(rune('a'+i))
		w := newEngine().NewWorker(o)
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Shutdown)
	}
	return &cluster{submit: sub, store: st, bucket: strings.TrimPrefix(url[:strings.Index(url, "/runs?")], "s3://")}
}

func forBoth(t *testing.T, f func(t *testing.T, c *cluster)) {
	t.Run("embedded", func(t *testing.T) { t.Parallel(); f(t, embedded(t)) })
	t.Run("redis+minio", func(t *testing.T) { t.Parallel(); f(t, distributed(t)) })
}

func graph(t *testing.T, text string, overrides ...string) *spec.Graph {
	t.Helper()
	s, err := spec.Parse([]byte(text), "test.yaml", t.TempDir(), overrides...)
	if err != nil {
		t.Fatal(err)
	}
	g, err := s.Expand()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func run(t *testing.T, c *cluster, g *spec.Graph) *engine.RunStatus {
	t.Helper()
	st, err := submitAndWait(t, c, g)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// submitAndWait is run, with the submit's error returned rather than
// fatal.
func submitAndWait(t *testing.T, c *cluster, g *spec.Graph) (*engine.RunStatus, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	id, err := c.submit.Submit(ctx, g, engine.SubmitOptions{})
	if err != nil {
		return nil, err
	}
	st, err := c.submit.Wait(ctx, id, 20*time.Millisecond, nil)
	if err != nil {
		t.Fatalf("waiting for run %s: %v", id, err)
	}
	return st, nil
}

func output(t *testing.T, c *cluster, st *engine.RunStatus, node, out, file string) string {
	t.Helper()
	n, ok := st.Node(node)
	if !ok {
		t.Fatalf("no node %s", node)
	}
	a, ok := n.Outputs[out]
	if !ok {
		t.Fatalf("node %s (%s) has no output %s: %+v", node, n.State, out, n)
	}
	b, err := stages.NewInput(context.Background(), c.store, a).ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func states(st *engine.RunStatus) map[string]string {
	m := map[string]string{}
	for _, n := range st.Nodes {
		m[n.ID] = n.State
	}
	return m
}

func wantStates(t *testing.T, st *engine.RunStatus, want map[string]string) {
	t.Helper()
	got := states(st)
	for id, w := range want {
		if got[id] != w {
			t.Errorf("node %s is %s, want %s (run %s: %s)", id, got[id], w, st.State, st.Error)
		}
	}
}

func TestDiamond(t *testing.T) {
	forBoth(t, func(t *testing.T, c *cluster) {
		st := run(t, c, graph(t, diamondSpec))
		if st.State != engine.Succeeded {
			t.Fatalf("run %s: %s", st.State, st.Error)
		}
		if got := output(t, c, st, "d", "out", "out.txt"); got != "Ab|Ac" {
			t.Errorf("d = %q, want Ab|Ac", got)
		}
		// Every node ran after its parents.
		for _, pair := range [][2]string{{"a", "b"}, {"a", "c"}, {"b", "d"}, {"c", "d"}} {
			p, _ := st.Node(pair[0])
			ch, _ := st.Node(pair[1])
			if ch.StartedAt.Before(*p.FinishedAt) {
				t.Errorf("%s started at %v, before its parent %s finished at %v", pair[1], ch.StartedAt, pair[0], p.FinishedAt)
			}
		}
		// Resubmitting the same spec executes nothing: every node is cached.
		again := run(t, c, graph(t, diamondSpec))
		wantStates(t, again, map[string]string{"a": "cached", "b": "cached", "c": "cached", "d": "cached"})
		if got := output(t, c, again, "d", "out", "out.txt"); got != "Ab|Ac" {
			t.Errorf("cached d = %q, want Ab|Ac", got)
		}
		// Changing c's suffix re-executes c and d only.
		changed := run(t, c, graph(t, diamondSpec, "c.suffix=C"))
		wantStates(t, changed, map[string]string{"a": "cached", "b": "cached", "c": "done", "d": "done"})
		if got := output(t, c, changed, "d", "out", "out.txt"); got != "Ab|AC" {
			t.Errorf("d = %q, want Ab|AC", got)
		}
	})
}

// TestEqualContentHitsCache: a node re-executed (its key changed) that
// produces the same bytes has an output of the same digest, so its children
// keep their keys and are cached.
func TestEqualContentHitsCache(t *testing.T) {
	forBoth(t, func(t *testing.T, c *cluster) {
		const text = `
nodes:
  a: {stage: test.emit, params: {text: A}}
  b: {stage: test.concat, inputs: {in: a}, params: {sep: "|"}}
  c: {stage: test.concat, inputs: {in: b}, params: {suffix: "!"}}
`
		first := run(t, c, graph(t, text))
		if first.State != engine.Succeeded {
			t.Fatalf("run %s: %s", first.State, first.Error)
		}
		// With one input the separator is unused: b's key changes, its
		// output does not.
		second := run(t, c, graph(t, text, "b.sep=+"))
		wantStates(t, second, map[string]string{"a": "cached", "b": "done", "c": "cached"})
		b1, _ := first.Node("b")
		b2, _ := second.Node("b")
		o1, o2 := b1.Outputs["out"], b2.Outputs["out"]
		if o1.Digest != o2.Digest || o1.Prefix == o2.Prefix || o1.Producer.Run == o2.Producer.Run || o1.Producer.NodeKey == o2.Producer.NodeKey {
			t.Errorf("b's outputs: want one digest from two executions (runs, keys, prefixes): %+v and %+v", o1, o2)
		}
		// Each execution's output is an artifact of the store, with its
		// producer and lineage, whose manifest is stored once: in the node
		// record, not beside the files.
		rec, err := c.submit.NodeRecord(context.Background(), b2.Key)
		if err != nil {
			t.Fatal(err)
		}
		stored := rec.Outputs["out"]
		// Attempt and output make one key segment: one directory per
		// output in a filesystem store.
		if p := stored.Prefix; !strings.HasPrefix(p, "artifacts/"+b2.Key+"-") || !strings.HasSuffix(p, "-out") || strings.Count(p, "/") != 1 {
			t.Errorf("b's output is at %q, want artifacts/<key>-<attempt>-out", p)
		}
		if ok, err := artifact.Stored(context.Background(), c.store, stored); !ok || err != nil {
			t.Errorf("the files of b's output are not stored as recorded: %v", err)
		}
		if ok, err := artifact.Exists(context.Background(), c.store, o2.Prefix); ok || err != nil {
			t.Errorf("a second copy of b's manifest is stored beside its files (%v)", err)
		}
		a, _ := second.Node("a")
		if stored.Digest != o2.Digest || stored.Producer.Run != second.ID || stored.Producer.Stage != "test.concat" ||
			len(stored.Lineage) != 1 || stored.Lineage[0] != (artifact.Input{Name: "in", Digest: a.Outputs["out"].Digest}) {
			t.Errorf("stored manifest %+v", stored)
		}
	})
}

func TestFanOutFanIn(t *testing.T) {
	forBoth(t, func(t *testing.T, c *cluster) {
		g := graph(t, fanSpec)
		if len(g.Nodes) != 7 {
			t.Fatalf("expanded to %d nodes, want 7", len(g.Nodes))
		}
		st := run(t, c, g)
		if st.State != engine.Succeeded {
			t.Fatalf("run %s: %s", st.State, st.Error)
		}
		var total struct {
			Total float64 `json:"total"`
			N     int     `json:"n"`
		}
		if err := json.Unmarshal([]byte(output(t, c, st, "total", "total", "total.json")), &total); err != nil {
			t.Fatal(err)
		}
		// value = seed*10 + len("abc"), summed over seeds 1..5.
		if total.N != 5 || total.Total != 165 {
			t.Errorf("total = %+v, want 5 models summing to 165", total)
		}
		if s := states(st)["train[seed=3]"]; s != "done" {
			t.Errorf("train[seed=3] is %q", s)
		}
	})
}

func TestFlakyNodeSucceedsOnRetry(t *testing.T) {
	forBoth(t, func(t *testing.T, c *cluster) {
		g := graph(t, `
nodes:
  src: {stage: test.emit, params: {text: `+randomName("x")+`}}
  flaky: {stage: test.flaky, params: {fail_times: 2}, inputs: {in: src}}
  after: {stage: test.concat, inputs: {in: flaky}, params: {suffix: "!"}}
`)
		st := run(t, c, g)
		if st.State != engine.Succeeded {
			t.Fatalf("run %s: %s", st.State, st.Error)
		}
		n, _ := st.Node("flaky")
		if n.Attempt != 2 {
			t.Errorf("flaky succeeded on attempt %d, want 2 (after two failures)", n.Attempt)
		}
		if n.Error != "" {
			t.Errorf("a succeeded node keeps the error %q", n.Error)
		}
		if !strings.HasSuffix(output(t, c, st, "after", "out", "out.txt"), "!") {
			t.Error("child of the flaky node has the wrong output")
		}
	})
}

func TestFailingNodeFailsRun(t *testing.T) {
	forBoth(t, func(t *testing.T, c *cluster) {
		g := graph(t, `
nodes:
  src: {stage: test.emit, params: {text: `+randomName("x")+`}}
  bad: {stage: test.fail, params: {message: "the data is broken"}, inputs: {in: src}}
  child: {stage: test.concat, inputs: {in: bad}}
  grandchild: {stage: test.concat, inputs: {in: child}}
`)
		st := run(t, c, g)
		if st.State != engine.Failed {
			t.Fatalf("run is %s, want failed", st.State)
		}
		wantStates(t, st, map[string]string{"src": "done", "bad": "failed", "child": "cancelled", "grandchild": "cancelled"})
		if !strings.Contains(st.Error, "bad") || !strings.Contains(st.Error, "the data is broken") || !strings.Contains(st.Error, "2 attempts") {
			t.Errorf("run error %q does not name the node, its error and the attempts", st.Error)
		}
		bad, _ := st.Node("bad")
		if !strings.Contains(bad.Error, "the data is broken") {
			t.Errorf("node error = %q", bad.Error)
		}
		// Retry re-runs the failed and cancelled nodes; src stays done.
		n, err := c.submit.Retry(context.Background(), st.ID)
		if err != nil {
			t.Fatal(err)
		}
		if n != 3 {
			t.Errorf("retry re-ran %d nodes, want 3", n)
		}
		st, err = c.submit.Wait(context.Background(), st.ID, 20*time.Millisecond, nil)
		if err != nil {
			t.Fatal(err)
		}
		wantStates(t, st, map[string]string{"src": "done", "bad": "failed", "child": "cancelled"})
		if st.State != engine.Failed {
			t.Errorf("retried run is %s, want failed again", st.State)
		}
	})
}

func TestCancel(t *testing.T) {
	forBoth(t, func(t *testing.T, c *cluster) {
		ctx := context.Background()
		g := graph(t, `
nodes:
  slow: {stage: test.slow, params: {steps: 200, step_time: 20ms}}
  after: {stage: test.concat, inputs: {in: slow}}
`)
		id, err := c.submit.Submit(ctx, g, engine.SubmitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, c.submit, id, func(st *engine.RunStatus) bool { return states(st)["slow"] == "running" })
		if err := c.submit.Cancel(ctx, id, "test"); err != nil {
			t.Fatal(err)
		}
		st, err := c.submit.Status(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if st.State != engine.Cancelled {
			t.Errorf("run is %s", st.State)
		}
		wantStates(t, st, map[string]string{"slow": "cancelled", "after": "cancelled"})
		if err := c.submit.Cancel(ctx, id, "again"); err == nil {
			t.Error("cancelling a cancelled run succeeded")
		}
		// The manifest in the store says the same.
		m, err := c.submit.RunManifest(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if m.State != engine.Cancelled || len(m.Graph.Nodes) != 2 {
			t.Errorf("manifest: state %s, %d nodes", m.State, len(m.Graph.Nodes))
		}
	})
}

// TestEmbeddedRunSeenFromAnotherProcess: two embedded engines on one file
// store, as two `nerflow run` processes (or a run and `nerflow status`).
// The second cannot see the first's in-process Redis: it shows the live
// run as the store records it and says so, takes nothing over (no restore,
// no node run here) and refuses to control it.
func TestEmbeddedRunSeenFromAnotherProcess(t *testing.T) {
	st, err := fsstore.Open(storeDir(t))
	if err != nil {
		t.Fatal(err)
	}
	owner, other := embeddedOn(t, st, fastWorker()), embeddedOn(t, st, fastWorker())
	teststages.ResetExecutions()
	g := graph(t, `
nodes:
  text: {stage: test.emit, params: {text: `+randomName("view-")+`}}
  slow: {stage: test.slow, params: {steps: 40, step_time: 50ms}, inputs: {in: text}}
`)
	ctx := context.Background()
	id, err := owner.submit.Submit(ctx, g, engine.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, owner.submit, id, func(st *engine.RunStatus) bool { return states(st)["slow"] == engine.Running })
	seen, err := other.submit.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if seen.Source != "store" || seen.State != engine.Running || len(seen.Warnings) != 1 {
		t.Errorf("status from the other process: source %q, state %s, warnings %q", seen.Source, seen.State, seen.Warnings)
	}
	wantStates(t, seen, map[string]string{"text": engine.Done, "slow": engine.Queued})
	if err := other.submit.Cancel(ctx, id, "test"); err == nil || !strings.Contains(err.Error(), "another process") {
		t.Errorf("cancel from the other process: %v", err)
	}
	final := waitFor(t, owner.submit, id, func(st *engine.RunStatus) bool { return st.State != engine.Running })
	if final.State != engine.Succeeded {
		t.Fatalf("run %s: %s", final.State, final.Error)
	}
	if n := teststages.Executions("test.slow"); n != 1 {
		t.Errorf("test.slow ran %d times, want once: the other process took the run over", n)
	}
	// Ended, the run reads the same from both.
	waitFor(t, other.submit, id, func(st *engine.RunStatus) bool { return st.State == engine.Succeeded })
}

func waitFor(t *testing.T, e *engine.Engine, id string, cond func(*engine.RunStatus) bool) *engine.RunStatus {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		st, err := e.Status(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if cond(st) {
			return st
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("run %s: condition not met in 30s", id)
	return nil
}

func TestDatasetInput(t *testing.T) {
	c := embedded(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "out.txt"), []byte("from disk"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := spec.Parse([]byte(`
nodes:
  copy: {stage: test.concat, inputs: {in: ./data}, params: {suffix: "."}}
`), "t.yaml", filepath.Dir(dir))
	if err == nil {
		_, err = s.Expand()
	}
	if err == nil || !strings.Contains(err.Error(), "nodes.copy.inputs.in") {
		t.Fatalf("missing dataset: err = %v", err)
	}
	s, err = spec.Parse([]byte(`
nodes:
  copy: {stage: test.concat, inputs: {in: ./`+filepath.Base(dir)+`}, params: {suffix: "."}}
`), "t.yaml", filepath.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	g, err := s.Expand()
	if err != nil {
		t.Fatal(err)
	}
	st := run(t, c, g)
	if got := output(t, c, st, "copy", "out", "out.txt"); got != "from disk." {
		t.Errorf("copy = %q", got)
	}
}

// TestStoreURLDataset: an input given as a store URL (an object, or a
// prefix holding several) is copied into the run's store.
func TestStoreURLDataset(t *testing.T) {
	c := distributed(t)
	cfg := testenv.S3(t)
	bucket := randomName("nfdata-")
	q := "?endpoint=" + cfg.Endpoint + "&access_key=" + cfg.AccessKey + "&secret_key=" + cfg.SecretKey + "&secure=false"
	ctx := context.Background()
	src, err := storage.Open(ctx, "s3://"+bucket+q)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for key, text := range map[string]string{"corpus/out.txt": "from s3", "dir/out.txt": "in a dir", "dir/other.txt": "x"} {
		if _, err := storage.PutBytes(ctx, src, key, []byte(text)); err != nil {
			t.Fatal(err)
		}
	}
	s, err := spec.Parse([]byte(`
nodes:
  one: {stage: test.concat, inputs: {in: "s3://`+bucket+`/corpus/out.txt`+q+`"}}
  dir: {stage: test.concat, inputs: {in: "s3://`+bucket+`/dir`+q+`"}}
`), "t.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	g, err := s.Expand()
	if err != nil {
		t.Fatal(err)
	}
	st := run(t, c, g)
	if st.State != engine.Succeeded {
		t.Fatalf("run %s: %s", st.State, st.Error)
	}
	if got := output(t, c, st, "one", "out", "out.txt"); got != "from s3" {
		t.Errorf("one = %q", got)
	}
	if got := output(t, c, st, "dir", "out", "out.txt"); got != "in a dir" {
		t.Errorf("dir = %q", got)
	}
	m, err := c.submit.RunManifest(ctx, st.ID)
	if err != nil {
		t.Fatal(err)
	}
	for url, a := range m.Datasets {
		if strings.Contains(url, "/dir?") && len(a.Files) != 2 {
			t.Errorf("prefix dataset has files %+v", a.Files)
		}
		if strings.Contains(a.Producer.Source, cfg.SecretKey) {
			t.Errorf("the manifest records the secret key: %s", a.Producer.Source)
		}
		if stored, err := artifact.Read(ctx, c.store, a.Prefix); err != nil || stored.Digest != a.Digest {
			t.Errorf("stored manifest of dataset %s: %+v, %v", a.Producer.Source, stored, err)
		}
	}
}
