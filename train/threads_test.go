package train

import (
	"runtime"
	"testing"
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
	release := make(chan struct{})
	go func() {
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
		if got := openBLASThreads(); got != blasThreads {
			t.Errorf("SetThreads(%d): OpenBLAS has %d threads, want %d", n, got, blasThreads)
		}
	}
}
