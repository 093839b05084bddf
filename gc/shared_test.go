package gc_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nerflow/nerflow/gc"
	"github.com/nerflow/nerflow/internal/testenv"
	"github.com/nerflow/nerflow/pipeline/engine"
	"github.com/nerflow/nerflow/registry"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/storage"
	"github.com/nerflow/nerflow/storage/artifact"
	"github.com/nerflow/nerflow/storage/fsstore"
	"github.com/nerflow/nerflow/storage/layout"
)

// Two stages shaped like embeddings.vectors and train.tagger: a table of
// "vectors" (large, made from the param n), and a "model" that carries
// the table unchanged beside weights of its own, saved as a directory.
func init() {
	stages.Register(stages.Stage{
		Name: "test.gcvectors", Version: 1,
		Doc:     "Writes a vectors.bin of SharedMinSize+n bytes made from n.",
		Params:  []stages.Param{stages.IntParam("n", 1, "which table", stages.AtLeast(1))},
		Outputs: []stages.Port{{Name: "vectors", Kind: "embeddings"}},
		Run: func(c *stages.Context) error {
			return c.Output("vectors").WriteFile("vectors.bin", table(c.Params.Int("n")))
		},
	})
	stages.Register(stages.Stage{
		Name: "test.gctrain", Version: 1,
		Doc:     "Saves a model directory: the input's vectors.bin unchanged and weights made from the seed.",
		Params:  []stages.Param{stages.IntParam("seed", 1, "seed", stages.AtLeast(0))},
		Inputs:  []stages.Port{{Name: "vectors", Kind: "embeddings"}},
		Outputs: []stages.Port{{Name: "model", Kind: "checkpoint"}},
		Run: func(c *stages.Context) error {
			dir := filepath.Join(c.WorkDir(), "model")
			if err := c.Input("vectors").FetchFile("vectors.bin", filepath.Join(dir, "vectors.bin")); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, "weights.pt"), fmt.Appendf(nil, "weights of seed %d", c.Params.Int("seed")), 0o644); err != nil {
				return err
			}
			return c.Output("model").AddDir(dir)
		},
	})
}

func table(n int) []byte {
	return bytes.Repeat([]byte{byte(n)}, artifact.SharedMinSize+n)
}

const sharedSpec = `
name: %s
nodes:
  vectors: {stage: test.gcvectors, params: {n: %d}}
  train: {stage: test.gctrain, params: {seed: %d}, inputs: {vectors: vectors}}
`

func TestCollectSharedFileStore(t *testing.T) {
	st, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	collectShared(t, st)
}

func TestCollectSharedMinIO(t *testing.T) {
	cfg := testenv.S3(t)
	u := "s3://nftest-gc-" + randomHex() + "/store?endpoint=" + cfg.Endpoint + "&access_key=" + cfg.AccessKey + "&secret_key=" + cfg.SecretKey + "&secure=false"
	st, err := storage.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	collectShared(t, st)
}

// collectShared: a model stores the vectors it carries once, shared; the
// vectors of a registered model stay however old its run, those of a
// collected run go, and those a run takes up again between the plan and
// its application stay.
func collectShared(t *testing.T, st storage.Store) {
	ctx := context.Background()
	v := newEnv(t, st, engine.WorkerOptions{Concurrency: 2})
	blob := func(n int) string { return layout.Blob(storage.Digest(table(n))) }

	v.run(fmt.Sprintf(sharedSpec+"  register: {stage: registry.register, inputs: {model: train.model}}\n", "gcshared", 1, 1))
	v.run(fmt.Sprintf(sharedSpec, "gcsharedtmp", 2, 2))
	v.run(fmt.Sprintf(sharedSpec, "gcsharedtmp", 2, 3)) // the same vectors, cached; new weights
	newest := v.run(fmt.Sprintf(sharedSpec, "gcsharedtmp", 3, 4))
	if _, err := registry.New(st, registry.WithLogger(quiet)).Sync(ctx); err != nil {
		t.Fatal(err)
	}
	model, err := registry.New(st, registry.WithLogger(quiet)).Resolve(ctx, "gcshared")
	if err != nil {
		t.Fatal(err)
	}
	if f, _ := model.Model.File("vectors.bin"); f.Blob != blob(1) {
		t.Fatalf("the model's vectors.bin is %+v, want the shared %s", f, blob(1))
	}
	// The two models trained on table 2 share one copy of it.
	objs, err := st.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	copies := 0
	for _, o := range objs {
		if o.Size == int64(len(table(2))) {
			copies++
		}
	}
	if copies != 2 { // the vectors node's output, and the blob both models use
		t.Errorf("table 2 is stored %d times, want 2: %v", copies, objs)
	}

	// S3 gives times to the second: what was written in the plan's second
	// may be written after it, and stays.
	time.Sleep(1100 * time.Millisecond)
	opts := gc.Options{KeepRuns: 1, Live: v.e.Status}
	plan, err := gc.Make(ctx, st, opts)
	if err != nil {
		t.Fatal(err)
	}
	planned := map[string]bool{}
	for _, it := range plan.Delete {
		planned[it.Prefix] = true
	}
	if !planned[blob(2)] {
		t.Errorf("the plan keeps %s, which only collected runs use", blob(2))
	}
	for _, k := range []string{blob(1), blob(3)} {
		if planned[k] {
			t.Errorf("the plan deletes %s, which a registered model or the newest run uses", k)
		}
	}
	t.Logf("plan: %d objects, %d bytes to delete; %d bytes kept", plan.Objects(), plan.Bytes, plan.KeptBytes)

	// Between the plan and its application, a run takes table 2 up again.
	again := v.run(fmt.Sprintf(sharedSpec, "gcsharedother", 2, 5))
	if _, err := plan.Apply(ctx, opts); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{blob(1), blob(2), blob(3)} {
		if !exists(t, st, k) {
			t.Errorf("%s was deleted", k)
		}
	}
	if err := artifact.Verify(ctx, st, model.Model); err != nil {
		t.Errorf("the registered model after the collection: %v", err)
	}
	for _, s := range []*engine.RunStatus{newest, again} {
		n, _ := s.Node("train")
		if ok, err := artifact.Stored(ctx, st, n.Outputs["model"]); !ok || err != nil {
			t.Errorf("run %s: its model is not whole after the collection: %v %v", s.ID, ok, err)
		}
	}

	// Once nothing uses table 2 any more, it goes.
	v.run(fmt.Sprintf(sharedSpec, "gcsharedother", 3, 6))
	if _, err := registry.New(st, registry.WithLogger(quiet)).Sync(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	plan, err = gc.Make(ctx, st, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plan.Apply(ctx, opts); err != nil {
		t.Fatal(err)
	}
	if exists(t, st, blob(2)) {
		t.Errorf("%s stayed, though no kept run or model uses it", blob(2))
	}
	if !exists(t, st, blob(1)) || !exists(t, st, blob(3)) {
		t.Errorf("a kept model's or run's vectors went")
	}
	if err := artifact.Verify(ctx, st, model.Model); err != nil {
		t.Errorf("the registered model after the second collection: %v", err)
	}
}
