package engine_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/nerflow/nerflow/pipeline/engine"
	"github.com/nerflow/nerflow/storage/fsstore"
)

// A worker whose last node has ended calls its Idle hook (where the
// process returns memory), and not before it has run one.
func TestIdleHookAfterLastNode(t *testing.T) {
	st, err := fsstore.Open(storeDir(t))
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	idle := make(chan struct{}, 16)
	o := fastWorker()
	o.Concurrency = 1
	o.Idle = func() {
		calls.Add(1)
		idle <- struct{}{}
	}
	c := embeddedOn(t, st, o)
	if n := calls.Load(); n != 0 {
		t.Fatalf("Idle called %d times before any node ran", n)
	}
	s := run(t, c, graph(t, diamondSpec))
	if s.State != engine.Succeeded {
		t.Fatalf("run %s: %s", s.State, s.Error)
	}
	select {
	case <-idle:
	case <-time.After(10 * time.Second):
		t.Fatal("the worker ran the run's nodes and never called Idle")
	}
	// One node at a time: idle after each of the four, not more.
	time.Sleep(200 * time.Millisecond)
	if n := calls.Load(); n < 1 || n > 4 {
		t.Errorf("Idle called %d times for 4 nodes run one at a time", n)
	}
}
