package gc_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nerflow/nerflow/gc"
	"github.com/nerflow/nerflow/internal/testenv"
	"github.com/nerflow/nerflow/pipeline/engine"
	"github.com/nerflow/nerflow/pipeline/spec"
	_ "github.com/nerflow/nerflow/pipeline/teststages"
	"github.com/nerflow/nerflow/registry"
	"github.com/nerflow/nerflow/storage"
	"github.com/nerflow/nerflow/storage/artifact"
	"github.com/nerflow/nerflow/storage/fsstore"
	"github.com/nerflow/nerflow/storage/layout"
	_ "github.com/nerflow/nerflow/storage/s3store"
)

func randomHex() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func TestCollectFileStore(t *testing.T) {
	st, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	collect(t, st)
}

func TestCollectMinIO(t *testing.T) {
	cfg := testenv.S3(t)
	u := "s3://nftest-gc-" + randomHex() + "/store?endpoint=" + cfg.Endpoint + "&access_key=" + cfg.AccessKey + "&secret_key=" + cfg.SecretKey + "&secure=false"
	st, err := storage.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	collect(t, st)
}

const demoSpec = `
name: %s
nodes:
  text: {stage: test.emit, params: {text: %s}}
  train: {stage: test.seed, params: {seed: %d}, inputs: {in: text}}
`

const modelSpec = demoSpec + `  register: {stage: registry.register, inputs: {model: train.model}}
`

const liveSpec = `
name: gclive
nodes:
  text: {stage: test.emit, params: {text: %s}}
  slow: {stage: test.slow, params: {steps: 30, step_time: 100ms}, inputs: {in: text}}
`

type env struct {
	t  *testing.T
	e  *engine.Engine
	st storage.Store
}

// quiet is the tests' logger: it discards.
var quiet = slog.New(slog.DiscardHandler)

// newEnv starts an engine on st, in a namespace of its own, and a worker
// configured by wo, until the test ends.
func newEnv(t *testing.T, st storage.Store, wo engine.WorkerOptions) *env {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: testenv.Redis(t)})
	t.Cleanup(func() { rdb.Close() })
	e := engine.New(rdb, st, engine.WithNamespace("nftest-gc-"+randomHex()), engine.WithLogger(quiet))
	t.Cleanup(func() { e.Close() })
	w := e.NewWorker(wo)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Shutdown)
	return &env{t: t, e: e, st: st}
}

func (v *env) submit(text string) string {
	v.t.Helper()
	return v.submitIn(text, v.t.TempDir())
}

// submitIn submits a spec whose relative dataset paths are under dir.
func (v *env) submitIn(text, dir string) string {
	v.t.Helper()
	s, err := spec.Parse([]byte(text), "spec.yaml", dir)
	if err != nil {
		v.t.Fatal(err)
	}
	g, err := s.Expand()
	if err != nil {
		v.t.Fatal(err)
	}
	id, err := v.e.Submit(context.Background(), g, engine.SubmitOptions{})
	if err != nil {
		v.t.Fatal(err)
	}
	return id
}

func (v *env) run(text string) *engine.RunStatus {
	v.t.Helper()
	return v.runIn(text, v.t.TempDir())
}

func (v *env) runIn(text, dir string) *engine.RunStatus {
	v.t.Helper()
	id := v.submitIn(text, dir)
	st, err := v.e.Wait(context.Background(), id, 20*time.Millisecond, nil)
	if err != nil || st.State != engine.Succeeded {
		v.t.Fatalf("run %s: %v %+v", id, err, st)
	}
	// The run's end reaches Redis a moment before its final manifest
	// reaches the store; a registry sync in between would take the run
	// for one still running and leave it unexamined, which gc keeps.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var m engine.RunManifest
		if _, err := storage.GetJSON(context.Background(), v.st, layout.RunManifest(id), &m); err == nil && m.State != engine.Running {
			break
		}
		if time.Now().After(deadline) {
			v.t.Fatalf("run %s: its manifest does not record its end", id)
		}
	}
	// Runs keep distinct creation times (the newest per pipeline is kept).
	time.Sleep(10 * time.Millisecond)
	return st
}

// outputs are the file keys of a node's outputs in a run.
func outputs(t *testing.T, st *engine.RunStatus, node string) (keys []string, record string) {
	t.Helper()
	n, _ := st.Node(node)
	if n == nil {
		t.Fatalf("run %s has no node %s", st.ID, node)
	}
	for _, a := range n.Outputs {
		for _, f := range a.Files {
			keys = append(keys, a.Key(f.Name))
		}
	}
	return keys, layout.NodeRecord(n.Key)
}

func exists(t *testing.T, st storage.Store, key string) bool {
	t.Helper()
	_, err := st.Stat(context.Background(), key)
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

// collect: old runs' outputs, records and manifests go; the newest run of
// each pipeline, registered models with their run, and what a run in
// flight uses stay; the dry run's plan deletes nothing and is what the
// collection deletes; the run in flight then finishes, and an old run run
// again recomputes instead of hitting a record whose outputs went.
func collect(t *testing.T, st storage.Store) {
	ctx := context.Background()
	v := newEnv(t, st, engine.WorkerOptions{Concurrency: 2, ProgressInterval: 50 * time.Millisecond, DelayedPollInterval: 100 * time.Millisecond})
	e := v.e

	old1 := v.run(fmt.Sprintf(demoSpec, "gcdemo", "one", 1))
	old2 := v.run(fmt.Sprintf(demoSpec, "gcdemo", "two", 2))
	newest := v.run(fmt.Sprintf(demoSpec, "gcdemo", "three", 3))
	model1 := v.run(fmt.Sprintf(modelSpec, "gcmodel", "m", 7))
	model2 := v.run(fmt.Sprintf(modelSpec, "gcmodel", "m", 8))
	if _, err := registry.New(st, registry.WithLogger(quiet)).Sync(ctx); err != nil {
		t.Fatal(err)
	}
	// In flight: its text is a cache hit on the first run's, which is
	// otherwise past keeping.
	live := v.submit(fmt.Sprintf(liveSpec, "one"))
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		s, err := e.Status(ctx, live)
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := s.Node("slow"); n != nil && n.State == engine.Running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the live run's slow node did not start: %+v", s)
		}
	}

	before, err := st.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	opts := gc.Options{KeepRuns: 1, Live: e.Status}
	plan, err := gc.Make(ctx, st, opts)
	if err != nil {
		t.Fatal(err)
	}
	if after, _ := st.List(ctx, ""); len(after) < len(before) {
		t.Fatalf("planning deleted objects: %d before, %d after", len(before), len(after))
	}
	planned := map[string]bool{}
	for _, it := range plan.Delete {
		for _, k := range it.Objects {
			planned[k] = true
		}
	}
	gone := func(s *engine.RunStatus, node string) []string {
		keys, rec := outputs(t, s, node)
		return append(keys, rec)
	}
	mustGo := append(append(append(gone(old1, "train"), gone(old2, "train")...), gone(old2, "text")...),
		layout.RunManifest(old1.ID), layout.RunManifest(old2.ID))
	mustStay := append(append(append(append(gone(old1, "text"), gone(newest, "train")...), gone(newest, "text")...), gone(model1, "train")...),
		layout.RunManifest(newest.ID), layout.RunManifest(model1.ID), layout.RunManifest(model2.ID), layout.RunManifest(live), layout.LiveMarker(live))
	for _, k := range mustGo {
		if !planned[k] {
			t.Errorf("the plan keeps %s", k)
		}
	}
	for _, k := range mustStay {
		if planned[k] {
			t.Errorf("the plan deletes %s", k)
		}
	}
	if !slices.Contains(plan.LiveRuns, live) || len(plan.Unreadable) != 0 {
		t.Errorf("live runs %v, unreadable %v", plan.LiveRuns, plan.Unreadable)
	}
	t.Logf("plan: %d objects, %d bytes to delete; %d bytes kept", plan.Objects(), plan.Bytes, plan.KeptBytes)

	deleted, err := plan.Apply(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if deleted != plan.Bytes {
		t.Errorf("deleted %d bytes, the plan said %d", deleted, plan.Bytes)
	}
	for _, k := range mustGo {
		if exists(t, st, k) {
			t.Errorf("%s is still there", k)
		}
	}
	for _, k := range mustStay {
		if !strings.HasPrefix(k, layout.Runs+live) && !exists(t, st, k) {
			t.Errorf("%s was deleted", k)
		}
	}

	noOrphans(t, st)

	// The run in flight finishes; an old run run again recomputes.
	s, err := e.Wait(ctx, live, 20*time.Millisecond, nil)
	if err != nil || s.State != engine.Succeeded {
		t.Fatalf("the run in flight during the collection: %v %+v", err, s)
	}
	again := v.run(fmt.Sprintf(demoSpec, "gcdemo", "two", 2))
	for _, n := range again.Nodes {
		if n.State != engine.Done {
			t.Errorf("run again after the collection, %s is %s, want done (computed again)", n.ID, n.State)
		}
	}
	// Once more: the old run's record is gone, the run again is the newest
	// of gcdemo now.
	plan2, err := gc.Make(ctx, st, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range plan2.Delete {
		if it.Kind == "run" && !strings.Contains(it.Prefix, newest.ID) {
			t.Errorf("second plan deletes %s", it.Prefix)
		}
	}
}

// A run whose state cannot be read (an embedded run of another process)
// stops the collection: Apply deletes nothing.
func TestUnreadableLiveRun(t *testing.T) {
	ctx := context.Background()
	st, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	v := newEnv(t, st, engine.WorkerOptions{Concurrency: 2})
	v.run(fmt.Sprintf(demoSpec, "gcdemo", "one", 1))
	v.run(fmt.Sprintf(demoSpec, "gcdemo", "two", 2))
	if _, err := registry.New(st, registry.WithLogger(quiet)).Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(ctx, layout.LiveMarker("elsewhere"), strings.NewReader("")); err != nil {
		t.Fatal(err)
	}
	opts := gc.Options{KeepRuns: 1}
	plan, err := gc.Make(ctx, st, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Unreadable) != 1 || plan.Unreadable[0] != "elsewhere" {
		t.Errorf("unreadable live runs: %v", plan.Unreadable)
	}
	before, _ := st.List(ctx, "")
	if _, err := plan.Apply(ctx, opts); err == nil || !strings.Contains(err.Error(), "live/elsewhere") {
		t.Errorf("Apply with a live run of unknown state: %v", err)
	}
	if after, _ := st.List(ctx, ""); len(after) != len(before) {
		t.Errorf("Apply with a live run of unknown state deleted %d objects", len(before)-len(after))
	}
	// Without the marker, the first run goes.
	if err := st.Delete(ctx, layout.LiveMarker("elsewhere")); err != nil {
		t.Fatal(err)
	}
	plan, err = gc.Make(ctx, st, opts)
	if err != nil || plan.Objects() == 0 {
		t.Fatalf("plan: %v, %d objects", err, plan.Objects())
	}
	if _, err := plan.Apply(ctx, opts); err != nil {
		t.Fatal(err)
	}
}

// An imported dataset goes with the last run that imported it; one a kept
// run imported stays.
func TestCollectDatasets(t *testing.T) {
	ctx := context.Background()
	st, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	v := newEnv(t, st, engine.WorkerOptions{Concurrency: 2})
	dir := t.TempDir()
	for _, d := range []string{"a", "b"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, d, "out.txt"), []byte("dataset "+d), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const dataSpec = "name: gcdata\nnodes:\n  cat: {stage: test.concat, inputs: {in: ./%s}}\n"
	v.runIn(fmt.Sprintf(dataSpec, "a"), dir)
	v.runIn(fmt.Sprintf(dataSpec, "b"), dir)
	if _, err := registry.New(st, registry.WithLogger(quiet)).Sync(ctx); err != nil {
		t.Fatal(err)
	}
	sets, err := st.List(ctx, layout.Datasets+"/")
	if err != nil || len(sets) != 4 { // two datasets: a file and a manifest each
		t.Fatalf("datasets before: %v %v", sets, err)
	}
	plan, err := gc.Make(ctx, st, gc.Options{KeepRuns: 1, Live: v.e.Status})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plan.Apply(ctx, gc.Options{KeepRuns: 1, Live: v.e.Status}); err != nil {
		t.Fatal(err)
	}
	left, err := st.List(ctx, layout.Datasets+"/")
	if err != nil || len(left) != 2 || !strings.HasSuffix(left[0].Key, ".manifest.json") {
		t.Fatalf("datasets after: %v %v", left, err)
	}
	noOrphans(t, st)
	rc, _, err := st.Get(ctx, left[1].Key)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "dataset b" {
		t.Errorf("the dataset kept holds %q, want the newest run's (dataset b)", b)
	}
}

// noOrphans checks that every artifact manifest left describes files that
// are there.
func noOrphans(t *testing.T, st storage.Store) {
	t.Helper()
	objs, err := st.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, o := range objs {
		keys[o.Key] = true
	}
	for _, o := range objs {
		prefix, ok := strings.CutSuffix(o.Key, ".manifest.json")
		if !ok || strings.HasPrefix(o.Key, layout.Runs) {
			continue
		}
		var m artifact.Manifest
		if _, err := storage.GetJSON(context.Background(), st, o.Key, &m); err != nil {
			if errors.Is(err, storage.ErrNotFound) {
				continue // a run in flight replaced its checkpoint since the listing
			}
			t.Fatal(err)
		}
		if m.Prefix != prefix {
			t.Errorf("%s describes the files under %s", o.Key, m.Prefix)
		}
		for _, f := range m.Files {
			if !keys[m.Key(f.Name)] {
				t.Errorf("%s names %s, which is gone", o.Key, f.Name)
			}
		}
	}
}
