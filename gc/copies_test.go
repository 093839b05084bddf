package gc_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nerflow/nerflow/gc"
	"github.com/nerflow/nerflow/pipeline/engine"
	"github.com/nerflow/nerflow/registry"
	"github.com/nerflow/nerflow/storage/artifact"
	"github.com/nerflow/nerflow/storage/fsstore"
	"github.com/nerflow/nerflow/storage/layout"
)

// A registered model's artifact rots; its producer is executed again by a
// later run, which writes a good copy under another prefix. That run then
// falls out of keeping, but the copy is the last good one of what the kept
// model needs: gc keeps it and the record that names it, and it still
// verifies afterwards.
func TestKeepsTheGoodCopyOfADamagedModel(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	st, err := fsstore.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	v := newEnv(t, st, engine.WorkerOptions{Concurrency: 2})
	registered := v.run(fmt.Sprintf(modelSpec, "gccopy", "m", 7))
	reg := registry.New(st, registry.WithLogger(quiet))
	if _, err := reg.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	ver, err := reg.Get(ctx, "gccopy", 1)
	if err != nil {
		t.Fatal(err)
	}

	// Rot the registered copy, and have verify drop its record so that the
	// next run executes the producer again.
	f := filepath.Join(root, filepath.FromSlash(ver.Model.Key(ver.Model.Files[0].Name)))
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x20
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if r, err := v.e.Verify(ctx, registered.ID, true); err != nil || len(r.Damaged) != 1 || r.Dropped != 1 {
		t.Fatalf("verify --drop: %+v %v", r, err)
	}
	remade := v.run(fmt.Sprintf(demoSpec, "gccopy", "m", 7))
	n, _ := remade.Node("train")
	if n == nil || n.State != engine.Done {
		t.Fatalf("the producer of the damaged model did not execute again: %+v", n)
	}
	good := n.Outputs["model"]
	if good.Prefix == ver.Model.Prefix || good.Digest != ver.Model.Digest {
		t.Fatalf("the new copy is at %s (%s); the registered one at %s (%s)", good.Prefix, good.Digest, ver.Model.Prefix, ver.Model.Digest)
	}
	// The run that made the copy is no longer the newest of its pipeline.
	v.run(fmt.Sprintf(demoSpec, "gccopy", "other", 8))
	if _, err := reg.Sync(ctx); err != nil {
		t.Fatal(err)
	}

	opts := gc.Options{KeepRuns: 1, Live: v.e.Status, Now: func() time.Time { return time.Now().Add(time.Hour) }}
	plan, err := gc.Make(ctx, st, opts)
	if err != nil {
		t.Fatal(err)
	}
	planned := map[string]bool{}
	for _, it := range plan.Delete {
		planned[it.Prefix] = true
	}
	if !planned[layout.RunManifest(remade.ID)] {
		t.Errorf("the run that made the copy is kept: the test does not test the copy")
	}
	if _, err := plan.Apply(ctx, opts); err != nil {
		t.Fatal(err)
	}
	if !exists(t, st, layout.NodeRecord(n.Key)) {
		t.Error("the record of the good copy was deleted")
	}
	if err := artifact.Verify(ctx, st, good); err != nil {
		t.Errorf("the last good copy of the registered model: %v", err)
	}
	if exists(t, st, layout.RunManifest(remade.ID)) {
		t.Errorf("the manifest of run %s, which nothing keeps, is still there", remade.ID)
	}
}
