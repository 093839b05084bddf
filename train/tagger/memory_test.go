package tagger

import (
	"bytes"
	"context"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/internal/allocator"
	"github.com/nerflow/nerflow/kit"
)

// lockedBuffer collects log output written from several goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestTensorsFreedExactlyOnce runs trainings and predictions of both heads
// at once, as a worker serving several nodes does, and checks that every
// tensor they made is freed, and freed once: gotch logs "Probably double
// free tensor" when it is asked to free a tensor it no longer knows (before
// scripts/gotch-adapt.sh made tensor names unique, two goroutines could
// give two tensors one name, and the second was never freed), and its table
// of live tensors must be back to where it started.
func TestTensorsFreedExactlyOnce(t *testing.T) {
	logs := &lockedBuffer{}
	orig := log.Writer()
	log.SetOutput(io.MultiWriter(logs, orig))
	defer log.SetOutput(orig)
	runtime.GC() // finalize what earlier tests left, so that the count below is stable
	before := len(ts.ExistingTensors)

	c := fixtureCorpus(fixture)
	jobs := []struct {
		head, scheme, loss string
		removal            int
	}{
		{TokenHead, "io", LossGCE, 2},
		{CRFHead, "bio", LossCRF, 0},
		{TokenHead, "bio", LossCE, 0},
		{CRFHead, "io", LossCRF, 0},
	}
	var wg sync.WaitGroup
	errs := make([]error, len(jobs))
	for i, j := range jobs {
		wg.Go(func() {
			run := tinyTrainConfig(j.loss)
			run.Epochs, run.Seed = 3, uint64(i+1)
			run.SetLossParam("update_interval", j.removal)
			m, _, err := Fit(context.Background(), Job{Train: c, Dev: c, Model: tinyConfig(j.head, j.scheme), Run: run,
				Device: gotch.CPU, MinWordCount: 1, Types: []string{"PER", "LOC"}})
			if err != nil {
				errs[i] = err
				return
			}
			defer m.Close()
			_, errs[i] = m.Predict(c, 3)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("job %d: %v", i, err)
		}
	}
	if strings.Contains(logs.String(), "double free") {
		t.Errorf("gotch reported a double free:\n%s", logs.String())
	}
	if after := len(ts.ExistingTensors); after != before {
		t.Errorf("%d live tensors before the runs, %d after: %d not freed", before, after, after-before)
	}
}

// TestLinkedAllocator checks that this test binary, which links gotch like
// the nerflow binary does, uses the allocator that scripts/gotch-adapt.sh
// chose for the gotch copy it was built against (its .nerflow-allocator):
// jemalloc must serve malloc for libtorch too, not only be loaded.
func TestLinkedAllocator(t *testing.T) {
	want := adaptedAllocator(t)
	got := allocator.Current()
	t.Logf("gotch adapted for %s; malloc from %s (%s)", want, got.Library, got)
	if got.Name != want {
		t.Errorf("allocator is %s (malloc from %q), but gotch was adapted for %s: is the binary linked against another gotch copy, or LD_PRELOAD set?", got, got.Library, want)
	}
	// internal/allocator/malloc_conf.c's setting, unless the environment overrides it.
	if want == "jemalloc" && os.Getenv("MALLOC_CONF") == "" && got.OversizeThreshold != 0 {
		t.Errorf("jemalloc's oversize_threshold is %d, want 0 (malloc_conf not read from the binary?)", got.OversizeThreshold)
	}
	if kit.AllocatorName() != got.String() {
		t.Errorf("the training log would report %q, want %q", kit.AllocatorName(), got)
	}
}

// adaptedAllocator reads the allocator gotch-adapt.sh wrote into the gotch
// module this package builds against (go.mod's replace, a go.work, or the
// GPU kit's vendor/ copy).
func adaptedAllocator(t *testing.T) string {
	t.Helper()
	var dirs []string
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/sugarme/gotch").Output()
	if dir := strings.TrimSpace(string(out)); err == nil && dir != "" {
		dirs = append(dirs, dir)
	}
	dirs = append(dirs, filepath.Join("..", "vendor", "github.com", "sugarme", "gotch"))
	for _, dir := range dirs {
		data, err := os.ReadFile(filepath.Join(dir, ".nerflow-allocator"))
		if err == nil {
			return strings.TrimSpace(string(data))
		}
	}
	t.Skipf("no .nerflow-allocator in %v: gotch was adapted by a gotch-adapt.sh older than the allocator choice (rerun scripts/gotch-adapt.sh)", dirs)
	return ""
}
