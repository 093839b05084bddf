package kit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/ts"
)

func TestThreadShare(t *testing.T) {
	for _, c := range []struct{ cores, active, want int }{
		{2, 1, 2}, {2, 2, 1}, {2, 3, 1}, {16, 3, 5}, {16, 4, 4}, {8, 0, 8},
	} {
		if got := threadShare(c.cores, c.active); got != c.want {
			t.Errorf("threadShare(%d cores, %d active) = %d, want %d", c.cores, c.active, got, c.want)
		}
	}
}

// Each computation sets libtorch's thread count on its own OS thread: a
// second one started beside a first gets its share without changing the
// first's, and SetThreads overrides the share.
func TestComputeThreadsPerOSThread(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer SetThreads(0)
	cores := runtime.NumCPU()
	_, done := computeThreads()
	defer done()
	if got := Threads(); got != cores {
		t.Fatalf("alone: %d threads, want %d", got, cores)
	}
	second := make(chan int)
	release, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished) // after done: the tests after this one count computations
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		_, done := computeThreads()
		defer done()
		second <- Threads()
		<-release
	}()
	if got, want := <-second, threadShare(cores, 2); got != want {
		t.Errorf("second of two: %d threads, want %d", got, want)
	}
	close(release)
	<-finished
	if got := Threads(); got != cores {
		t.Errorf("first of two: %d threads, want %d (set by itself, untouched by the second)", got, cores)
	}
	SetThreads(1)
	refresh, done2 := computeThreads()
	defer done2()
	refresh()
	if got := Threads(); got != 1 {
		t.Errorf("after SetThreads(1): %d threads", got)
	}
}

// OpenBLAS's own pool stays at one thread whatever libtorch's count, so
// that the two pools do not busy-wait on the same cores.
func TestOpenBLASSingleThreaded(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer SetThreads(0)
	if openBLASThreads() == 0 {
		t.Skip("this libtorch does not use OpenBLAS")
	}
	for _, n := range []int{1, 2, 4} {
		SetThreads(n)
		if got := Threads(); got != n {
			t.Fatalf("SetThreads(%d): libtorch has %d", n, got)
		}
		if got := openBLASThreads(); got != BLASThreads {
			t.Errorf("SetThreads(%d): OpenBLAS has %d threads, want %d", n, got, BLASThreads)
		}
	}
}

// A computation runs on a thread of its own, registered as a computation
// while it runs; the thread is gone after, nested calls run in place, and
// a panic reaches the caller.
func TestOnComputeThread(t *testing.T) {
	before := computing.Load()
	var tid, nestedTID int
	var active int32
	OnComputeThread(func(refresh func()) {
		tid = syscall.Gettid()
		active = computing.Load()
		OnComputeThread(func(func()) { nestedTID = syscall.Gettid() })
	})
	if tid == syscall.Gettid() {
		t.Fatal("computed on the caller's thread")
	}
	if active != before+1 {
		t.Errorf("%d computations registered while running, want %d", active, before+1)
	}
	if nestedTID != tid {
		t.Errorf("nested call on thread %d, want the computing thread %d", nestedTID, tid)
	}
	if got := computing.Load(); got != before {
		t.Errorf("%d computations registered after, want %d", got, before)
	}
	// Never on the main thread (which Go would not end); a few more tries
	// give the first goroutine the chance to land there.
	for range 5 {
		OnComputeThread(func(func()) {
			if syscall.Gettid() == os.Getpid() {
				t.Error("computed on the process's main thread")
			}
		})
	}
	// The thread ends computeIdle after its last computation (Go ends a
	// thread whose goroutine exits locked).
	task := fmt.Sprintf("/proc/self/task/%d", tid)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := os.Stat(task); errors.Is(err, fs.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("thread %d still alive after the computation", tid)
		}
		time.Sleep(10 * time.Millisecond)
	}

	defer func() {
		p := recover()
		if p == nil || !strings.Contains(fmt.Sprint(p), "boom") {
			t.Errorf("recovered %v, want the computation's panic", p)
		}
	}()
	OnComputeThread(func(func()) { panic("boom") })
}

// A computation's thread count is its own: a thread that never set one
// runs libtorch on one thread even after a computation set 2, so that
// work outside the computations (loading a checkpoint on a stage's
// goroutine) leaves no OpenMP team behind on one of Go's threads. Checked
// in a fresh process, where no thread has set a count yet.
func TestThreadsOutsideComputations(t *testing.T) {
	if os.Getenv("NERFLOW_TEST_FRESH_PROCESS") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestThreadsOutsideComputations$", "-test.v")
		cmd.Env = append(os.Environ(), "NERFLOW_TEST_FRESH_PROCESS=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("in a fresh process: %v\n%s", err, out)
		}
		return
	}
	threadsSet.Store(2) // not SetThreads, which also sets the calling thread
	parallelOp := func() {
		x := ts.MustOnes([]int64{1 << 20}, gotch.Float, gotch.CPU)
		x.MustAdd(x, true).MustDrop()
	}
	var inside int
	OnComputeThread(func(func()) {
		parallelOp()
		inside = Threads()
	})
	if inside != 2 {
		t.Errorf("a computation set 2 threads and has %d after a parallel operation", inside)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	parallelOp()
	if got := Threads(); got != 1 {
		t.Errorf("a thread that never set a count runs %d threads, want 1", got)
	}
}
