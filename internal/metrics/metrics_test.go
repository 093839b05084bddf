package metrics_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/nerflow/nerflow/internal/metrics"
	"github.com/nerflow/nerflow/internal/testenv"
	"github.com/nerflow/nerflow/pipeline/engine"
	"github.com/nerflow/nerflow/pipeline/spec"
	_ "github.com/nerflow/nerflow/pipeline/teststages"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/storage/fsstore"
	"github.com/nerflow/nerflow/workers"
)

// A training that reports its throughput the way train.tagger does, and
// runs until it is released.
var release = make(chan struct{})

func init() {
	stages.Register(stages.Stage{
		Name: "metricstest.train", Version: 1,
		Outputs: []stages.Port{{Name: "model", Kind: "checkpoint"}},
		Run: func(c *stages.Context) error {
			c.Progress(10, 100, "epoch 1/3, loss 0.4210, 1234.5 tokens/s")
			select {
			case <-release:
			case <-c.Done():
				return c.Err()
			}
			return c.Output("model").WriteJSON("model.json", 1)
		},
	})
}

func TestMetricsAfterSmallRuns(t *testing.T) {
	addr := testenv.Redis(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var b [4]byte
	_, _ = rand.Read(b[:])
	ns := "nftest-" + hex.EncodeToString(b[:])
	st, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	e := engine.New(rdb, st, engine.WithNamespace(ns), engine.WithLogger(quiet))
	defer e.Close()
	pool, err := workers.Start(e, rdb, ns, workers.Config{Name: "m", Concurrency: 2,
		Worker: engine.WorkerOptions{ShutdownTimeout: time.Second, ProgressInterval: time.Millisecond}}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Shutdown()

	// asynq writes the worker's first heartbeat just after it starts.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ws, err := workers.List(ctx, rdb, ns)
		if err != nil {
			t.Fatal(err)
		}
		if len(ws) == 1 || time.Now().After(deadline) {
			break
		}
	}
	c := metrics.NewCollector(e, rdb, ns, quiet)
	reg := metrics.NewRegistry(c)
	// A run finished before the first scrape is the baseline.
	run := func(text string, sets ...string) *engine.RunStatus {
		t.Helper()
		s, err := spec.Parse([]byte(text), "m.yaml", t.TempDir(), sets...)
		if err != nil {
			t.Fatal(err)
		}
		g, err := s.Expand()
		if err != nil {
			t.Fatal(err)
		}
		id, err := e.Submit(ctx, g, engine.SubmitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rs, err := e.Wait(ctx, id, 20*time.Millisecond, nil)
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	const fan = `
name: fan
nodes:
  train: {stage: test.seed, fan_out: {seed: [1, 2, 3]}}
  total: {stage: test.sum, inputs: {models: train.model}}
`
	run(fan, "train.fan_out.seed=7,8")
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(c.Runs().WithLabelValues("succeeded")); got != 0 {
		t.Fatalf("the baseline run was counted: %v", got)
	}

	run(fan) // 4 nodes executed
	run(fan) // 4 nodes cached
	failed := run(`
name: bad
nodes:
  f: {stage: test.fail, retries: 0}
`)
	if failed.State != engine.Failed {
		t.Fatalf("the failing run %s", failed.State)
	}
	want := `
# HELP nerflow_runs_finished_total Runs finished, by outcome (succeeded, failed, cancelled).
# TYPE nerflow_runs_finished_total counter
nerflow_runs_finished_total{state="failed"} 1
nerflow_runs_finished_total{state="succeeded"} 2
# HELP nerflow_cache_hits_total Nodes served from the content-addressed cache instead of executed, by stage.
# TYPE nerflow_cache_hits_total counter
nerflow_cache_hits_total{stage="test.seed"} 3
nerflow_cache_hits_total{stage="test.sum"} 1
# HELP nerflow_nodes_finished_total Nodes finished, by stage and final state (done, cached, failed, cancelled).
# TYPE nerflow_nodes_finished_total counter
nerflow_nodes_finished_total{stage="test.fail",state="failed"} 1
nerflow_nodes_finished_total{stage="test.seed",state="cached"} 3
nerflow_nodes_finished_total{stage="test.seed",state="done"} 3
nerflow_nodes_finished_total{stage="test.sum",state="cached"} 1
nerflow_nodes_finished_total{stage="test.sum",state="done"} 1
# HELP nerflow_workers Live workers (asynq heartbeat), by device kind (cpu, gpu).
# TYPE nerflow_workers gauge
nerflow_workers{device_kind="cpu"} 1
nerflow_workers{device_kind="gpu"} 0
# HELP nerflow_worker_slots Nodes a worker may run at once.
# TYPE nerflow_worker_slots gauge
nerflow_worker_slots{device="cpu",worker="m/cpu"} 2
# HELP nerflow_up 1 when the exporter could read the cluster's state at this scrape.
# TYPE nerflow_up gauge
nerflow_up 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "nerflow_runs_finished_total", "nerflow_cache_hits_total",
		"nerflow_nodes_finished_total", "nerflow_workers", "nerflow_worker_slots", "nerflow_up"); err != nil {
		t.Error(err)
	}
	// Durations of the 4 executed nodes of the second run (cached ones
	// and the failed one have none).
	if n := testutil.CollectAndCount(c, "nerflow_node_duration_seconds"); n != 2 {
		t.Errorf("%d duration series, want 2 (test.seed and test.sum)", n)
	}
	// A second scrape counts nothing twice.
	if got := testutil.ToFloat64(c.Runs().WithLabelValues("succeeded")); got != 2 {
		t.Errorf("succeeded runs after another scrape: %v", got)
	}

	// A running training: its throughput and the queue's active task.
	s, _ := spec.Parse([]byte("name: t\nnodes:\n  train: {stage: metricstest.train}\n"), "t.yaml", t.TempDir())
	g, _ := s.Expand()
	id, err := e.Submit(ctx, g, engine.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(metrics.Handler(reg))
	defer srv.Close()
	var body string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		resp, err := srv.Client().Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		bb, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(bb)
		if strings.Contains(body, "nerflow_training_tokens_per_second{") {
			break
		}
	}
	for _, line := range []string{
		`nerflow_training_tokens_per_second{node="train",run="` + id + `",stage="metricstest.train",worker="m/cpu"} 1234.5`,
		`nerflow_runs_running 1`,
		`nerflow_queue_tasks{queue="cpu",state="active"} 1`,
		`go_goroutines `,
	} {
		if !strings.Contains(body, line) {
			t.Errorf("/metrics has no %q", line)
		}
	}
	close(release)
	if rs, err := e.Wait(ctx, id, 20*time.Millisecond, nil); err != nil || rs.State != engine.Succeeded {
		t.Fatalf("training run: %v", err)
	}
}
