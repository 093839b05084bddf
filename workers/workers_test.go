package workers_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nerflow/nerflow/internal/testenv"
	"github.com/nerflow/nerflow/pipeline/engine"
	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/storage"
	_ "github.com/nerflow/nerflow/storage/all"
	"github.com/nerflow/nerflow/workers"
)

// A training that takes a while, so that idle workers pick up the other
// seeds meanwhile.
func init() {
	stages.Register(stages.Stage{
		Name: "workerstest.train", Version: 1,
		Params:  []stages.Param{stages.IntParam("seed", 1, "seed"), stages.StringParam("queue_note", "", "")},
		Outputs: []stages.Port{{Name: "model", Kind: "checkpoint"}},
		Run: func(c *stages.Context) error {
			select {
			case <-time.After(400 * time.Millisecond):
			case <-c.Done():
				return c.Err()
			}
			return c.Output("model").WriteJSON("model.json", map[string]any{"seed": c.Params.Int("seed"), "device": c.Device})
		},
	})
}

func TestPlan(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  workers.Config
		want string // name=device:queues:concurrency per worker
		err  string
	}{
		{name: "default", cfg: workers.Config{}, want: "w/cpu=cpu:cpu:1"},
		{name: "cpu", cfg: workers.Config{Queues: []string{"cpu"}, Concurrency: 8}, want: "w/cpu=cpu:cpu:8"},
		{name: "gpu without a GPU", cfg: workers.Config{Queues: []string{"gpu", "cpu"}}, err: "needs a GPU device"},
		{name: "gpu on cpu allowed", cfg: workers.Config{Queues: []string{"gpu", "cpu"}, GPUOnCPU: true, Concurrency: 2}, want: "w/gpu,cpu=cpu:gpu,cpu:2"},
		{name: "one GPU", cfg: workers.Config{Queues: []string{"gpu"}, Devices: []string{"cuda:0"}, Concurrency: 4}, want: "w/cuda:0/gpu=cuda:0:gpu:1"},
		{name: "two GPUs and cpu", cfg: workers.Config{Queues: []string{"gpu", "cpu"}, Devices: []string{"cuda:0", "cuda:1"}, Concurrency: 4},
			want: "w/cuda:0/gpu,cpu=cuda:0:gpu,cpu:1 w/cuda:1/gpu,cpu=cuda:1:gpu,cpu:1 w/cpu=cpu:cpu:4"},
		{name: "GPU serving cpu only", cfg: workers.Config{Queues: []string{"cpu"}, Devices: []string{"cuda:0"}, Concurrency: 2},
			want: "w/cuda:0/cpu=cuda:0:cpu:1 w/cpu=cpu:cpu:2"},
		{name: "bad queue", cfg: workers.Config{Queues: []string{"tpu"}}, err: `queue "tpu"`},
		{name: "bad device", cfg: workers.Config{Devices: []string{"cuda:x"}}, err: `device "cuda:x"`},
		{name: "cpu and GPU", cfg: workers.Config{Devices: []string{"cpu", "cuda:0"}}, err: "cannot be listed with GPUs"},
		{name: "twice", cfg: workers.Config{Devices: []string{"cuda:0", "cuda:0"}}, err: "listed twice"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.cfg.Name = "w"
			plan, err := workers.Plan(c.cfg)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range plan {
				got = append(got, o.Name+"="+o.Device+":"+strings.Join(o.Queues, ",")+":"+strconv.Itoa(o.Concurrency))
			}
			if strings.Join(got, " ") != c.want {
				t.Errorf("plan %v, want %s", got, c.want)
			}
		})
	}
}

// A run's K seeds spread over the workers of three processes (real Redis
// and MinIO), each worker advertises itself, and a drained pool withdraws
// its advertisement.
func TestSeedsSpreadOverWorkers(t *testing.T) {
	addr := testenv.Redis(t)
	s3 := testenv.S3(t)
	var b [4]byte
	_, _ = rand.Read(b[:])
	ns := "nftest-" + hex.EncodeToString(b[:])
	url := "s3://" + ns + "/w?endpoint=" + s3.Endpoint + "&access_key=" + s3.AccessKey + "&secret_key=" + s3.SecretKey + "&secure=false"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	quiet := slog.New(slog.DiscardHandler)
	process := func() (*engine.Engine, *redis.Client) {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		st, err := storage.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		e := engine.New(rdb, st, engine.WithNamespace(ns), engine.WithLogger(quiet))
		t.Cleanup(func() { e.Close(); st.Close(); rdb.Close() })
		return e, rdb
	}
	opts := engine.WorkerOptions{ShutdownTimeout: 2 * time.Second}
	var pools []*workers.Pool
	for i, cfg := range []workers.Config{
		{Name: "a", Queues: []string{"cpu"}},
		{Name: "b", Queues: []string{"cpu"}},
		{Name: "gpubox", Queues: []string{"gpu", "cpu"}, Devices: []string{"cuda:0"}},
	} {
		cfg.Worker = opts
		e, rdb := process()
		p, err := workers.Start(e, rdb, ns, cfg, quiet)
		if err != nil {
			t.Fatalf("pool %d: %v", i, err)
		}
		pools = append(pools, p)
		defer p.Shutdown()
	}
	sub, rdb := process()

	// asynq writes a server's first heartbeat just after it starts.
	var ws []workers.Info
	for deadline := time.Now().Add(20 * time.Second); len(ws) < 4 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var err error
		if ws, err = workers.List(ctx, rdb, ns); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	for _, w := range ws {
		names = append(names, w.Name+" "+w.Device+" "+strings.Join(w.Queues, ","))
		if !w.Advertised || w.Version == "" || w.Concurrency != 1 || w.Status != "active" {
			t.Errorf("worker %+v", w)
		}
	}
	want := []string{"a/cpu cpu cpu", "b/cpu cpu cpu", "gpubox/cpu cpu cpu", "gpubox/cuda:0/gpu,cpu cuda:0 gpu,cpu"}
	if !slices.Equal(names, want) {
		t.Fatalf("workers = %q, want %q", names, want)
	}

	const specText = `
name: seeds
nodes:
  train:
    stage: workerstest.train
    fan_out: {seed: [1, 2, 3, 4, 5, 6, 7, 8]}
  finetune:
    stage: workerstest.train
    queue: gpu
    params: {seed: 9}
`
	s, err := spec.Parse([]byte(specText), "seeds.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	g, err := s.Expand()
	if err != nil {
		t.Fatal(err)
	}
	id, err := sub.Submit(ctx, g, engine.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// While it runs, the workers report the nodes they run.
	sawActive := false
	for !sawActive {
		ws, err := workers.List(ctx, rdb, ns)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range ws {
			for _, n := range w.Active {
				if n.Run == id && (strings.HasPrefix(n.Node, "train[") || n.Node == "finetune") {
					sawActive = true
				}
			}
		}
		st, err := sub.Status(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if st.State != engine.Running {
			break // asynq's heartbeat (every 5 s) may not have caught it
		}
		time.Sleep(200 * time.Millisecond)
	}
	st, err := sub.Wait(ctx, id, 50*time.Millisecond, nil)
	if err != nil || st.State != engine.Succeeded {
		t.Fatalf("run: %v %+v", err, st)
	}
	byWorker := map[string]int{}
	for _, n := range st.Nodes {
		if strings.HasPrefix(n.ID, "train[") {
			byWorker[n.Worker]++
		}
		if n.ID == "finetune" && n.Worker != "gpubox/cuda:0/gpu,cpu" {
			t.Errorf("the gpu node ran on %s, want gpubox/cuda:0/gpu,cpu (the only GPU)", n.Worker)
		}
	}
	if len(byWorker) < 3 {
		t.Errorf("8 seeds ran on %d workers (%v), want them spread over at least 3 of 4", len(byWorker), byWorker)
	}
	t.Logf("seeds per worker: %v (saw active nodes in the listing: %v)", byWorker, sawActive)

	pools[0].Shutdown()
	ws, err = workers.List(ctx, rdb, ns)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		if w.Name == "a/cpu" {
			t.Errorf("a drained worker is still listed: %+v", w)
		}
	}
}
