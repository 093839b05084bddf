package train

import (
	"bytes"
	"context"
	"io"
	"log"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/ts"
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
			run.Epochs, run.UpdateInterval, run.Seed = 3, j.removal, uint64(i+1)
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
