package predict

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/train/tagger"
)

// A swap is taken before the next batch even when the queue never drains:
// requests that each fill most of a batch leave one waiting after every
// batch, and the new version must not wait for the load to end.
func TestSwapUnderSaturation(t *testing.T) {
	tg := tinyModel(t, 1)
	dir := t.TempDir()
	if err := tg.Save(dir); err != nil {
		t.Fatal(err)
	}
	again, err := tagger.Load(dir, gotch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	b := NewBatcher(NewModel(tg, Info{Version: "1"}), Options{MaxBatch: 64, Queue: 256})
	defer b.Close()
	// 40 sentences a request: two never share a batch of 64.
	sents := make([][]string, 40)
	for i := range sents {
		sents[i] = strings.Fields("John Smith flew from Paris to Berlin .")
	}
	ctx, stop := context.WithTimeout(context.Background(), 20*time.Second)
	defer stop()
	var (
		wg       sync.WaitGroup
		answered atomic.Int64
		mu       sync.Mutex
		versions []string
	)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				r, err := b.Predict(ctx, Request{Sentences: sents})
				if err != nil {
					if ctx.Err() == nil {
						t.Errorf("predict under load: %v", err)
					}
					return
				}
				answered.Add(1)
				mu.Lock()
				versions = append(versions, r.Model.Version)
				mu.Unlock()
			}
		}()
	}
	for answered.Load() < 16 {
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	b.Swap(NewModel(again, Info{Version: "2"}))
	took := time.Since(start)
	loadGoesOn := ctx.Err() == nil
	before := answered.Load()
	for answered.Load() < before+16 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	wg.Wait()
	if !loadGoesOn {
		t.Fatalf("the swap waited %s, until the load ended", took)
	}
	t.Logf("swapped in %s under load, %d answers", took, answered.Load())
	mu.Lock()
	defer mu.Unlock()
	if last := versions[len(versions)-1]; last != "2" {
		t.Errorf("after the swap, answers name version %s", last)
	}
}
