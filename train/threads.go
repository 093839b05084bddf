package train

// libtorch's intra-op threads. gotch v0.8.0 compiles the C functions that
// read and set their number (torch_api.cpp) but wraps neither in Go; they
// are linked into every binary that uses gotch, so they are declared and
// called here directly.
//
// With the OpenMP backend (Debian's libtorch, PyTorch's CPU builds) the
// number is per OS thread: at::set_num_threads sets the calling thread's
// OpenMP team size, and a thread that never set it takes the last value set
// anywhere. Every training and prediction here runs on a locked OS thread,
// so each sets its own share when it starts (see computeThreads).
//
// BLAS libraries keep a pool of their own. OpenBLAS's pthreads build (what
// Debian's libtorch links) starts one thread per core, and its threads and
// libtorch's OpenMP team both busy-wait between operations: with both at two
// threads on two cores, training ran at a third of its one-thread speed, in
// nerflow and in PyTorch alike (docs/tagger.md, Threads). So OpenBLAS runs
// in the calling thread (blasThreads, set at start), where the process has it, and the
// parallelism of an operation is libtorch's alone: a matrix product then
// uses one core, which costs little at this model's sizes (two threads
// bring elementwise and LSTM-step work more than they bring a product).

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>

int at_get_num_threads();
void at_set_num_threads(int n_threads);

static void blas_set_num_threads(int n) {
	void (*f)(int) = (void (*)(int))dlsym(RTLD_DEFAULT, "openblas_set_num_threads");
	if (f) f(n);
}

static int blas_get_num_threads(void) {
	int (*f)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "openblas_get_num_threads");
	return f ? f() : 0;
}
*/
import "C"

import (
	"runtime"
	"sync/atomic"
)

var (
	// threadsSet is the count SetThreads fixed for the process (0: a fair
	// share of the cores).
	threadsSet atomic.Int32
	// computing counts the trainings and predictions running in this
	// process, which share its cores.
	computing atomic.Int32
)

// Threads returns the number of threads libtorch uses for one operation on
// the calling OS thread.
func Threads() int { return int(C.at_get_num_threads()) }

// SetThreads fixes the number of threads libtorch uses for one operation
// in every training and prediction of the process, and on the calling OS
// thread; 0 returns to the default, a fair share of the cores among the
// trainings and predictions running at once.
func SetThreads(n int) {
	threadsSet.Store(int32(max(n, 0)))
	if n > 0 {
		setThreads(n)
	}
}

// blasThreads is the size of OpenBLAS's own pool, whatever libtorch's
// count (see the top of the file for why).
const blasThreads = 1

func init() { C.blas_set_num_threads(blasThreads) }

func setThreads(n int) { C.at_set_num_threads(C.int(n)) }

// openBLASThreads is OpenBLAS's pool size, 0 where the process has no
// OpenBLAS.
func openBLASThreads() int { return int(C.blas_get_num_threads()) }

// threadShare is the number of threads for one of active computations on
// cores cores: all of them alone, an equal share (at least 1) when several
// nodes run in one worker, so that two trainings on two cores each get one
// instead of fighting over four threads.
func threadShare(cores, active int) int {
	return max(1, cores/max(active, 1))
}

// computeThreads registers a training or prediction on the calling (locked)
// OS thread and sets its thread count; call the returned function when it
// is done. Long runs call the refresh function now and then (every epoch) to
// follow the number of neighbours.
func computeThreads() (refresh, done func()) {
	computing.Add(1)
	refresh = func() {
		n := int(threadsSet.Load())
		if n == 0 {
			n = threadShare(runtime.NumCPU(), int(computing.Load()))
		}
		if n != Threads() {
			setThreads(n)
		}
	}
	refresh()
	return refresh, func() { computing.Add(-1) }
}
