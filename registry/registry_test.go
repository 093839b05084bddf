package registry_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nerflow/nerflow/eval"
	"github.com/nerflow/nerflow/internal/testenv"
	"github.com/nerflow/nerflow/pipeline/engine"
	"github.com/nerflow/nerflow/pipeline/spec"
	_ "github.com/nerflow/nerflow/pipeline/teststages"
	"github.com/nerflow/nerflow/registry"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/storage"
	"github.com/nerflow/nerflow/storage/fsstore"
)

// A stand-in for train.evaluate: a report whose numbers are derived from
// the model, so that each model has its own metrics.
func init() {
	stages.Register(stages.Stage{
		Name: "registrytest.evaluate", Version: 1,
		Inputs:  []stages.Port{{Name: "model", Kind: "checkpoint"}},
		Outputs: []stages.Port{{Name: "report", Kind: "report"}},
		Run: func(c *stages.Context) error {
			var m struct{ Value float64 }
			if err := c.Input("model").ReadJSON("model.json", &m); err != nil {
				return err
			}
			r := eval.Report{Scheme: "io", Sentences: 4, Tokens: 20,
				Micro: eval.Score{Precision: 0.5, Recall: 0.25, F1: 1.0 / 3, Support: 8, Predicted: 4, Correct: 2},
				Types: map[string]eval.Score{"PER": {Precision: m.Value / 100, Recall: 1, F1: 1}}}
			return c.Output("report").WriteJSON("report.json", r)
		},
	})
}

const specText = `
name: demo
nodes:
  train:
    stage: test.seed
    params: {seed: 1, scale: 10}
    inputs: {in: ./data}
  evaluate:
    stage: registrytest.evaluate
    inputs: {model: train.model}
  register:
    stage: registry.register
    inputs: {model: train.model, reports: evaluate.report}
`

func TestRegistry(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data", "out.txt"), []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	em, err := engine.StartEmbedded(st, engine.WorkerOptions{Concurrency: 2}, engine.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer em.Close()
	run := func(sets ...string) *engine.RunStatus {
		t.Helper()
		s, err := spec.Parse([]byte(specText), "demo.yaml", dir, sets...)
		if err != nil {
			t.Fatal(err)
		}
		g, err := s.Expand()
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		rs, err := em.Run(rctx, g, engine.SubmitOptions{Spec: []byte(specText), SpecFile: "demo.yaml", Overrides: sets}, 20*time.Millisecond, nil)
		if err != nil || rs.State != engine.Succeeded {
			t.Fatalf("run: %v %+v", err, rs)
		}
		return rs
	}
	reg := registry.New(st)

	first := run()
	created, err := reg.SyncRun(ctx, first.ID, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(created) != 1 || created[0].Ref() != "demo@1" {
		t.Fatalf("first sync created %+v, want demo@1", created)
	}
	v, err := reg.Get(ctx, "demo", 1)
	if err != nil {
		t.Fatal(err)
	}
	trainNode, _ := first.Node("train")
	if v.Run != first.ID || v.Node != "train" || v.Stage != "test.seed" || v.Key != trainNode.Key ||
		v.Model.Digest != trainNode.Outputs["model"].Digest {
		t.Errorf("lineage = run %s node %s stage %s key %s model %s; want run %s, node train of test.seed, key %s, model %s",
			v.Run, v.Node, v.Stage, v.Key, v.Model.Digest, first.ID, trainNode.Key, trainNode.Outputs["model"].Digest)
	}
	var params map[string]any
	if err := json.Unmarshal(v.Params, &params); err != nil || params["seed"] != float64(1) || params["scale"] != float64(10) {
		t.Errorf("params = %s, want seed 1 and scale 10", v.Params)
	}
	if len(v.Datasets) != 1 || v.Datasets[0].Source != filepath.Join(dir, "data") ||
		!strings.HasPrefix(v.Datasets[0].Digest, "sha256:") || v.Datasets[0].Ports[0] != "test.seed in" {
		t.Errorf("datasets = %+v, want the imported data directory", v.Datasets)
	}
	if len(v.Metrics) != 1 || v.Metrics[0].Node != "evaluate" || v.Metrics[0].Micro.Correct != 2 ||
		v.Metrics[0].Types["PER"].Precision != 0.13 { // value 10 + len("abc")
		t.Errorf("metrics = %+v", v.Metrics)
	}
	if v.Spec != specText || v.Nerflow == "" {
		t.Errorf("spec %q nerflow %q", v.Spec, v.Nerflow)
	}

	// The same spec again is served from the cache: same model, no version.
	again := run()
	if n, _ := again.Node("register"); n.State != engine.Cached {
		t.Errorf("register node of the second run is %s, want cached", n.State)
	}
	if created, err := reg.SyncRun(ctx, again.ID, 10*time.Second); err != nil || len(created) != 0 {
		t.Fatalf("sync after a cached run created %+v (%v), want nothing", created, err)
	}
	// Another seed is another model.
	third := run("train.seed=2")
	created, err = reg.SyncRun(ctx, third.ID, 10*time.Second)
	if err != nil || len(created) != 1 || created[0].Ref() != "demo@2" {
		t.Fatalf("sync after seed=2 created %+v (%v), want demo@2", created, err)
	}

	if err := reg.Promote(ctx, "demo", 1, "production"); err != nil {
		t.Fatal(err)
	}
	if err := reg.Promote(ctx, "demo", 2, "staging"); err != nil {
		t.Fatal(err)
	}
	if err := reg.Promote(ctx, "demo", 3, "production"); !errors.Is(err, registry.ErrNoVersion) {
		t.Errorf("promoting demo@3: %v, want ErrNoVersion", err)
	}
	if err := reg.Promote(ctx, "demo", 2, "Prod!"); err == nil {
		t.Error("promoting to an invalid tag succeeded")
	}
	if p, err := reg.Resolve(ctx, "demo@production"); err != nil || p.Version != 1 {
		t.Fatalf("demo@production = %+v (%v), want version 1", p, err)
	}
	if err := reg.Promote(ctx, "demo", 2, "production"); err != nil {
		t.Fatal(err)
	}

	// A fresh registry over the same store (another process, Redis lost)
	// sees the same state and registers nothing twice.
	reg2 := registry.New(st)
	if created, err := reg2.Sync(ctx); err != nil || len(created) != 0 {
		t.Fatalf("fresh sync created %+v (%v)", created, err)
	}
	ms, err := reg2.Models(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || ms[0].Name != "demo" || ms[0].Versions != 2 || ms[0].Latest.Version != 2 ||
		ms[0].Tags["production"] != 2 || ms[0].Tags["staging"] != 2 {
		t.Fatalf("models = %+v", ms)
	}
	if latest, err := reg2.Resolve(ctx, "demo"); err != nil || latest.Version != 2 {
		t.Fatalf("latest = %+v (%v)", latest, err)
	}
	if _, err := reg2.Resolve(ctx, "nope"); !errors.Is(err, registry.ErrNoModel) {
		t.Errorf("unknown model: %v", err)
	}
}

func TestParseRef(t *testing.T) {
	for _, c := range []struct {
		ref, name, tag string
		n              int
		bad            bool
	}{
		{ref: "demo@3", name: "demo", n: 3},
		{ref: "demo@production", name: "demo", tag: "production"},
		{ref: "demo", name: "demo"},
		{ref: "demo@0", bad: true},
		{ref: "Demo@1", bad: true},
		{ref: "demo@pro duction", bad: true},
	} {
		name, n, tag, err := registry.ParseRef(c.ref)
		if (err != nil) != c.bad || name != c.name || n != c.n || tag != c.tag {
			t.Errorf("ParseRef(%q) = %q %d %q %v", c.ref, name, n, tag, err)
		}
	}
}

// Promotions from two processes at once go through the Redis lease and
// neither is lost (the tags file is read-modify-written under the lock).
func TestPromoteConcurrentRedis(t *testing.T) {
	addr := testenv.Redis(t)
	ctx := context.Background()
	st, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// Versions written as Sync would, without a run.
	for n := 1; n <= 2; n++ {
		v := registry.Version{Name: "m", Version: n, Registered: time.Now()}
		if _, err := storage.PutJSON(ctx, st, "registry/models/m/"+string(rune('0'+n))+".json", v); err != nil {
			t.Fatal(err)
		}
	}
	ns := "nftest-reg-" + time.Now().Format("150405.000000")
	errs := make(chan error, 20)
	for i := 0; i < 20; i++ {
		go func() {
			rdb := redis.NewClient(&redis.Options{Addr: addr})
			defer rdb.Close()
			r := registry.New(st, registry.WithRedis(rdb, ns), registry.WithLogger(slog.New(slog.DiscardHandler)))
			errs <- r.Promote(ctx, "m", 1+i%2, "t"+string(rune('a'+i)))
		}()
	}
	for i := 0; i < 20; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	tags, err := registry.New(st).Tags(ctx, "m")
	if err != nil || len(tags) != 20 {
		t.Fatalf("tags after 20 concurrent promotions: %d %v (%v)", len(tags), tags, err)
	}
}
