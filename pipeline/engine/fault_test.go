package engine_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nerflow/nerflow/internal/testenv"
	"github.com/nerflow/nerflow/pipeline/engine"
	"github.com/nerflow/nerflow/pipeline/teststages"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/storage"
)

// Fault tests: servers stopped or emptied mid-run, with the short node
// lease and reconcile interval below so that they fit in CI's time. They
// are not parallel: they count stage executions, which are per process.

const (
	testLease     = 2 * time.Second
	testReconcile = 500 * time.Millisecond
)

func faultWorker(name string) engine.WorkerOptions {
	o := fastWorker()
	o.Name = name
	o.NodeLease = testLease
	o.ReconcileInterval = testReconcile
	return o
}

// faultCluster is a submitting engine and two workers, each with its own
// Redis client and store connection as separate processes would have.
type faultCluster struct {
	sub   *engine.Engine
	store storage.Store
	logs  *countingHandler // the workers' log records
}

// countingHandler counts log records at WARN and above, and passes every
// record on to next.
type countingHandler struct {
	next slog.Handler
	mu   *sync.Mutex
	msgs *[]string
}

func newCountingHandler(next slog.Handler) *countingHandler {
	return &countingHandler{next: next, mu: &sync.Mutex{}, msgs: new([]string)}
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		h.mu.Lock()
		*h.msgs = append(*h.msgs, r.Level.String()+" "+r.Message)
		h.mu.Unlock()
	}
	if h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}
func (h *countingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.next = h.next.WithAttrs(as)
	return &c
}
func (h *countingHandler) WithGroup(g string) slog.Handler {
	c := *h
	c.next = h.next.WithGroup(g)
	return &c
}

// since returns the records counted after the first n.
func (h *countingHandler) since(n int) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), (*h.msgs)[n:]...)
}

func (h *countingHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(*h.msgs)
}

func newFaultCluster(t *testing.T, redisAddr, storeURL string) *faultCluster {
	t.Helper()
	ns := randomName("nffault-")
	logs := newCountingHandler(testLogger(t).Handler())
	engine.RouteRedisLogs(slog.New(logs), 30*time.Second)
	t.Cleanup(func() { engine.RouteRedisLogs(testLogger(t), 30*time.Second) })
	newEngine := func() (*engine.Engine, storage.Store) {
		// go-redis gives up on a command after a few quick retries; the
		// engine waits outages out above it.
		rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
		s, err := storage.Open(context.Background(), storeURL)
		// A MinIO that answers its health check may still be starting.
		for i := 0; i < 100 && storage.IsTransient(err); i++ {
			time.Sleep(100 * time.Millisecond)
			s, err = storage.Open(context.Background(), storeURL)
		}
		if err != nil {
			t.Fatal(err)
		}
		e := engine.New(rdb, s, engine.WithNamespace(ns), engine.WithLogger(slog.New(logs)), engine.WithRestoreDelay(3*time.Second))
		t.Cleanup(func() { e.Close(); s.Close(); rdb.Close() })
		return e, s
	}
	sub, st := newEngine()
	for _, name := range []string{"worker-a", "worker-b"} {
		e, _ := newEngine()
		w := e.NewWorker(faultWorker(name))
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Shutdown)
	}
	return &faultCluster{sub: sub, store: st, logs: logs}
}

// waitRun polls run id (through outages: errors are retried) until cond.
func waitRun(t *testing.T, e *engine.Engine, id, what string, limit time.Duration, cond func(*engine.RunStatus) bool) *engine.RunStatus {
	t.Helper()
	deadline := time.Now().Add(limit)
	var last *engine.RunStatus
	var lastErr error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		st, err := e.Status(ctx, id)
		cancel()
		if err == nil {
			last = st
			if cond(st) {
				return st
			}
		}
		lastErr = err
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("run %s: %s did not happen in %s (last status %+v, last error %v)", id, what, limit, last, lastErr)
	return nil
}

func progressOf(st *engine.RunStatus, node string) int64 {
	n, _ := st.Node(node)
	if n == nil || n.State != engine.Running || n.Progress == nil {
		return 0
	}
	return n.Progress.Done
}

func over(st *engine.RunStatus) bool { return st.State != engine.Running }

// checkOutputs reads every output of a finished run back from the store:
// node records (which hold the outputs' manifests) and files must be whole
// (their digests verified).
func checkOutputs(t *testing.T, e *engine.Engine, st *engine.RunStatus) {
	t.Helper()
	store := e.Store()
	for _, n := range st.Nodes {
		rec, err := e.NodeRecord(context.Background(), n.Key)
		if err != nil {
			t.Errorf("%s: node record %s: %v", n.ID, n.Key, err)
			continue
		}
		for name, a := range n.Outputs {
			if stored := rec.Outputs[name]; stored.Digest != a.Digest {
				t.Errorf("%s.%s: recorded digest %s, want %s", n.ID, name, stored.Digest, a.Digest)
				continue
			}
			for _, f := range a.Files {
				if _, err := stages.NewInput(context.Background(), store, a).ReadFile(f.Name); err != nil {
					t.Errorf("%s.%s: %s: %v", n.ID, name, f.Name, err)
				}
			}
		}
	}
}

const faultSpec = `
nodes:
  text: {stage: test.emit, params: {text: %s}}
  slow: {stage: test.slow, params: {steps: %d, step_time: 100ms}, inputs: {in: text}}
  after: {stage: test.concat, inputs: {in: text}, params: {suffix: "!"}}
  last: {stage: test.seed, inputs: {in: after}, params: {seed: 3}}
`

// TestRedisRestartedEmpty: Redis loses all its data mid-run (restarted
// without persistence). The workers restore the run from its manifest and
// node records in the store and finish it; nothing committed is computed
// again and the running node is not run twice.
func TestRedisRestartedEmpty(t *testing.T) {
	rs := testenv.PrivateRedis(t)
	_, url := s3Store(t)
	c := newFaultCluster(t, rs.Addr(), url)
	teststages.ResetExecutions()
	g := graph(t, fmt.Sprintf(faultSpec, randomName("redis-"), 30))
	ctx := context.Background()
	id, err := c.sub.Submit(ctx, g, engine.SubmitOptions{Spec: []byte("test")})
	if err != nil {
		t.Fatal(err)
	}
	waitRun(t, c.sub, id, "slow reaching step 5", time.Minute, func(st *engine.RunStatus) bool { return progressOf(st, "slow") >= 5 })
	rs.Stop()
	fault := time.Now()
	logsBefore := c.logs.count()
	// While Redis is away, status degrades to the run manifest and says so.
	st, err := c.sub.Status(ctx, id)
	if err != nil || st.Source != "manifest" || len(st.Warnings) == 0 {
		t.Errorf("status while Redis is down: %v %+v", err, st)
	}
	time.Sleep(4 * time.Second)
	// Each worker polls its queues every 10 ms and forwards due tasks
	// every 100 ms: a line per failure would repeat each message dozens
	// of times by now. Rate-limited, each kind of message appears once per
	// worker (two here) and client.
	kinds := map[string]int{}
	for _, m := range c.logs.since(logsBefore) {
		kinds[m[:min(len(m), 40)]]++
	}
	for k, n := range kinds {
		if n > 3 {
			t.Errorf("logged %d times in a 4 s Redis outage: %q", n, k)
		}
	}
	rs.Start()
	st = waitRun(t, c.sub, id, "the run finishing", 2*time.Minute, over)
	t.Logf("Redis away 4 s, restarted empty: run finished %s after Redis stopped", time.Since(fault).Round(100*time.Millisecond))
	if st.State != engine.Succeeded {
		t.Fatalf("run %s: %s", st.State, st.Error)
	}
	for stage, want := range map[string]int{"test.emit": 1, "test.slow": 1, "test.concat": 1, "test.seed": 1} {
		if got := teststages.Executions(stage); got != want {
			t.Errorf("%s executed %d times, want %d", stage, got, want)
		}
	}
	checkOutputs(t, c.sub, st)
}

// TestRunStateLostThenCancelAndRetry: a run whose Redis keys vanished can
// still be read, retried and cancelled.
func TestRunStateLostThenCancelAndRetry(t *testing.T) {
	rs := testenv.PrivateRedis(t)
	_, url := s3Store(t)
	c := newFaultCluster(t, rs.Addr(), url)
	ctx := context.Background()
	flush := func() {
		rdb := redis.NewClient(&redis.Options{Addr: rs.Addr()})
		defer rdb.Close()
		if err := rdb.FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	failing := graph(t, `
nodes:
  text: {stage: test.emit, params: {text: `+randomName("lost-")+`}}
  bad: {stage: test.fail, retries: 0, inputs: {in: text}}
  after: {stage: test.concat, inputs: {in: bad}}
`)
	id, err := c.sub.Submit(ctx, failing, engine.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitRun(t, c.sub, id, "the run failing", time.Minute, over)
	flush()
	n, err := c.sub.Retry(ctx, id)
	if err != nil || n != 2 {
		t.Fatalf("retry after Redis lost the run: %d nodes, %v", n, err)
	}
	st := waitRun(t, c.sub, id, "the retried run failing", time.Minute, over)
	wantStates(t, st, map[string]string{"text": "done", "bad": "failed", "after": "cancelled"})

	long, err := c.sub.Submit(ctx, graph(t, fmt.Sprintf(faultSpec, randomName("cancel-"), 100)), engine.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitRun(t, c.sub, long, "slow running", time.Minute, func(st *engine.RunStatus) bool { return progressOf(st, "slow") >= 1 })
	flush()
	st, err = c.sub.Status(ctx, long)
	if err != nil || st.State != engine.Running {
		t.Fatalf("status after Redis lost the run: %v, %+v", err, st)
	}
	if err := c.sub.Cancel(ctx, long, "test"); err != nil {
		t.Fatalf("cancel after Redis lost the run: %v", err)
	}
	waitRun(t, c.sub, long, "the cancel", time.Minute, func(st *engine.RunStatus) bool { return st.State == engine.Cancelled })
}

// TestStoreOutageWaitedOut: MinIO stops for longer than a node's retries
// used to last (three attempts, 2 s and 4 s apart); nodes wait it out
// without spending attempts, status keeps working, and the run succeeds
// with whole artifacts.
func TestStoreOutageWaitedOut(t *testing.T) {
	ms, s3 := testenv.PrivateMinIO(t)
	url := "s3://" + randomName("nfout-") + "?endpoint=" + s3.Endpoint + "&access_key=" + s3.AccessKey +
		"&secret_key=" + s3.SecretKey + "&secure=false"
	c := newFaultCluster(t, testenv.Redis(t), url)
	teststages.ResetExecutions()
	ctx := context.Background()
	id, err := c.sub.Submit(ctx, graph(t, fmt.Sprintf(faultSpec, randomName("minio-"), 20)), engine.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitRun(t, c.sub, id, "slow reaching step 3", time.Minute, func(st *engine.RunStatus) bool { return progressOf(st, "slow") >= 3 })
	ms.Stop()
	fault := time.Now()
	const outage = 20 * time.Second
	time.Sleep(outage / 2)
	// Status needs only Redis for a live run.
	if st, err := c.sub.Status(ctx, id); err != nil || st.State != engine.Running {
		t.Errorf("status while the store is down: %v %+v", err, st)
	}
	time.Sleep(outage / 2)
	ms.Start()
	st := waitRun(t, c.sub, id, "the run finishing", 2*time.Minute, over)
	t.Logf("MinIO stopped for %s: run finished %s after the store stopped", outage, time.Since(fault).Round(100*time.Millisecond))
	if st.State != engine.Succeeded {
		t.Fatalf("run %s: %s", st.State, st.Error)
	}
	for _, n := range st.Nodes {
		if n.Attempt != 0 {
			t.Errorf("node %s finished on attempt %d: the outage spent attempts", n.ID, n.Attempt)
		}
	}
	for stage, want := range map[string]int{"test.emit": 1, "test.concat": 1, "test.seed": 1} {
		if got := teststages.Executions(stage); got != want {
			t.Errorf("%s executed %d times, want %d", stage, got, want)
		}
	}
	checkOutputs(t, c.sub, st)
}

// TestConcurrentIdenticalSubmits: two runs of one spec submitted at once
// compute each node once; the other run waits and is cached.
func TestConcurrentIdenticalSubmits(t *testing.T) {
	_, url := s3Store(t)
	c := newFaultCluster(t, testenv.Redis(t), url)
	teststages.ResetExecutions()
	g := graph(t, fmt.Sprintf(faultSpec, randomName("twice-"), 10))
	ctx := context.Background()
	ids := make([]string, 2)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, err := c.sub.Submit(ctx, g, engine.SubmitOptions{})
			if err != nil {
				t.Error(err)
			}
			ids[i] = id
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	var sts []*engine.RunStatus
	for _, id := range ids {
		st := waitRun(t, c.sub, id, "the run finishing", time.Minute, over)
		if st.State != engine.Succeeded {
			t.Fatalf("run %s %s: %s", id, st.State, st.Error)
		}
		sts = append(sts, st)
	}
	t.Logf("two identical submits: both finished %s after submitting", time.Since(start).Round(100*time.Millisecond))
	for stage, want := range map[string]int{"test.emit": 1, "test.slow": 1, "test.concat": 1, "test.seed": 1} {
		if got := teststages.Executions(stage); got != want {
			t.Errorf("%s executed %d times, want %d", stage, got, want)
		}
	}
	for _, node := range []string{"text", "slow", "after", "last"} {
		a, _ := sts[0].Node(node)
		b, _ := sts[1].Node(node)
		if a.State == b.State || a.Outputs[firstOutput(a)].Digest != b.Outputs[firstOutput(b)].Digest {
			t.Errorf("node %s: %s and %s; want one done and one cached, with the same outputs", node, a.State, b.State)
		}
	}
}

func firstOutput(n *engine.NodeStatus) string {
	names := n.OutputNames()
	if len(names) == 0 {
		return ""
	}
	return names[0]
}

// TestEmbeddedRedisIsPrivate: the in-process Redis of embedded mode refuses
// clients that do not know its random password.
func TestEmbeddedRedisIsPrivate(t *testing.T) {
	mr, rdb, err := engine.StartPrivateRedis()
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	defer rdb.Close()
	ctx := context.Background()
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("the engine's own client: %v", err)
	}
	other := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer other.Close()
	if v, err := other.Get(ctx, "k").Result(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Errorf("a client without the password read %q (%v), want NOAUTH", v, err)
	}
}
