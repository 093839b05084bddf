package predict

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A request that finds the queue full is refused at once, not left to
// wait for room. The batcher's loop is not started, so nothing drains the
// queue: the first request fills it.
func TestBatcherRefusesBeyondItsQueue(t *testing.T) {
	b := &Batcher{opts: Options{MaxBatch: 4, Queue: 1}, jobs: make(chan *job, 1), swaps: make(chan swap), done: make(chan struct{})}
	first, stop := context.WithCancel(context.Background())
	defer stop()
	waited := make(chan error, 1)
	go func() {
		_, err := b.Predict(first, Request{Texts: []string{"Paris"}})
		waited <- err
	}()
	for len(b.jobs) == 0 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	_, err := b.Predict(ctx, Request{Texts: []string{"Berlin"}})
	if !errors.Is(err, ErrOverloaded) || time.Since(start) > time.Second {
		t.Fatalf("a request beyond the queue: %v after %s, want ErrOverloaded at once", err, time.Since(start))
	}
	stop()
	if err := <-waited; !errors.Is(err, context.Canceled) {
		t.Errorf("the queued request: %v", err)
	}
}
