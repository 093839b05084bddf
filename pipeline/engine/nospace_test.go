package engine_test

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nerflow/nerflow/internal/testenv"
	"github.com/nerflow/nerflow/pipeline/engine"
	"github.com/nerflow/nerflow/storage"
	"github.com/nerflow/nerflow/storage/fsstore"
	"github.com/nerflow/nerflow/storage/layout"
)

// A file store that runs out of space fails the node that writes, with an
// error that says so and names the store and the object; nothing partial
// is published; once space is freed, the same spec resumes from the cache.
// The store is a tmpfs of 1 MiB (mounting one needs root: skipped
// otherwise).
func TestFullDiskFailsClearlyThenResumes(t *testing.T) {
	dir := storeDir(t)
	mountTmpfs(t, dir, "1m")
	st, err := fsstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := embeddedOn(t, st, fastWorker())
	const text = `
nodes:
  a: {stage: test.emit, params: {text: small}}
  b: {stage: test.fill, params: {size: 2097152}, inputs: {in: a}, retries: 0}
`
	first := run(t, c, graph(t, text))
	if first.State != engine.Failed {
		t.Fatalf("run %s on a full disk, want failed", first.State)
	}
	b, _ := first.Node("b")
	if want := "no space left on " + dir + " while writing artifacts/"; b.State != engine.Failed || !strings.Contains(first.Error, want) {
		t.Fatalf("b %s, run error %q; want b failed and the error to contain %q", b.State, first.Error, want)
	}
	t.Logf("the error: %s", first.Error)
	checkNothingPublished(t, st, b)
	// Space freed: the same spec resumes, a from the cache.
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT, "size=8m"); err != nil {
		t.Fatal(err)
	}
	second := run(t, c, graph(t, text))
	if second.State != engine.Succeeded {
		t.Fatalf("run %s after space was freed: %s", second.State, second.Error)
	}
	wantStates(t, second, map[string]string{"a": "cached", "b": "done"})
}

// The same with MinIO on a full disk: it answers "storage full"; the node
// fails saying so, publishes nothing, and resumes once space is freed.
func TestFullMinIOFailsClearlyThenResumes(t *testing.T) {
	dir := storeDir(t)
	mountTmpfs(t, dir, "48m")
	_, cfg := testenv.PrivateMinIOIn(t, dir)
	u := "s3://" + randomName("nffull-") + "?endpoint=" + cfg.Endpoint + "&access_key=" + cfg.AccessKey + "&secret_key=" + cfg.SecretKey + "&secure=false"
	var st storage.Store
	var err error
	for i := 0; i < 100; i++ {
		if st, err = storage.Open(context.Background(), u); !storage.IsTransient(err) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c := embeddedOn(t, st, fastWorker())
	const text = `
nodes:
  a: {stage: test.emit, params: {text: small}}
  b: {stage: test.fill, params: {size: 67108864}, inputs: {in: a}, retries: 0}
`
	first := run(t, c, graph(t, text))
	b, _ := first.Node("b")
	if want := "no space left on s3://"; first.State != engine.Failed || b.State != engine.Failed || !strings.Contains(first.Error, want) {
		t.Fatalf("run %s, b %s, error %q; want b failed and the error to contain %q", first.State, b.State, first.Error, want)
	}
	t.Logf("the error: %s", first.Error)
	checkNothingPublished(t, st, b)
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT, "size=256m"); err != nil {
		t.Fatal(err)
	}
	// MinIO looks at its free space again after a while: the command is
	// run again until it does. Until then the submit itself may fail,
	// unable to record the run, or the run may fail writing b.
	freed := time.Now()
	var second *engine.RunStatus
	for {
		var err error
		second, err = submitAndWait(t, c, graph(t, text))
		if err != nil {
			second = &engine.RunStatus{State: engine.Failed, Error: "submit: " + err.Error()}
		}
		if second.State == engine.Succeeded || !strings.Contains(second.Error, "no space left") || time.Since(freed) > time.Minute {
			break
		}
		time.Sleep(time.Second)
	}
	if second.State != engine.Succeeded {
		t.Fatalf("run %s after space was freed: %s", second.State, second.Error)
	}
	t.Logf("MinIO took writes again %v after space was freed", time.Since(freed).Round(100*time.Millisecond))
	wantStates(t, second, map[string]string{"a": "cached", "b": "done"})
}

// checkNothingPublished fails if node b left an output file or a record.
func checkNothingPublished(t *testing.T, st storage.Store, b *engine.NodeStatus) {
	t.Helper()
	objs, err := st.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if strings.HasPrefix(o.Key, layout.AttemptOutputs(b.Key, "")) || o.Key == layout.NodeRecord(b.Key) {
			t.Errorf("b published %s (%d bytes) on a full disk", o.Key, o.Size)
		}
	}
}

// A worker's scratch space that runs out fails the node whose stage
// writes there, saying so; the store is untouched.
func TestFullScratchSpaceFailsClearly(t *testing.T) {
	scratch := storeDir(t)
	mountTmpfs(t, scratch, "1m")
	st, err := fsstore.Open(storeDir(t))
	if err != nil {
		t.Fatal(err)
	}
	o := fastWorker()
	o.TempDir = scratch
	c := embeddedOn(t, st, o)
	const text = `
nodes:
  b: {stage: test.fill, params: {size: 2097152, scratch: true}, retries: 0}
`
	first := run(t, c, graph(t, text))
	b, _ := first.Node("b")
	if want := "no space left on the scratch space " + scratch + " while writing the stage's files"; first.State != engine.Failed || !strings.Contains(first.Error, want) {
		t.Fatalf("run %s, error %q; want it failed, saying %q", first.State, first.Error, want)
	}
	t.Logf("the error: %s", first.Error)
	checkNothingPublished(t, st, b)
	if entries, _ := os.ReadDir(scratch); len(entries) != 0 {
		t.Errorf("the stage's work directory was left in the scratch space: %v", entries)
	}
}

// mountTmpfs mounts a tmpfs of size (mount's size= option) on dir, to
// fill, until the test ends; it skips the test where mounting is not
// allowed (it needs root).
func mountTmpfs(t *testing.T, dir, size string) {
	t.Helper()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("cannot mount a tmpfs to fill (%v); needs root", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
}
