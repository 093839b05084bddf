package kit

// libtorch's intra-op threads. gotch v0.8.0 compiles the C functions that
// read and set their number (torch_api.cpp) but wraps neither in Go; they
// are linked into every binary that uses gotch, so they are declared and
// called here directly.
//
// With the OpenMP backend (Debian's libtorch, PyTorch's CPU builds) the
// number is per OS thread: at::set_num_threads sets the calling thread's
// OpenMP team size, and a thread that never set it takes, on its first
// libtorch operation, the last value set anywhere. Every training and
// prediction here runs on a locked OS thread, so each sets its own share
// when it starts (see computeThreads).
//
// Other threads keep one (setThreads): some libtorch work runs outside a
// training or prediction (building a tagger from its vectors, reading a
// checkpoint), on whatever Go thread the stage's goroutine is on. With the
// last count set anywhere (2 on two cores) that thread opened a parallel
// region, and libgomp gave it a team whose worker stays docked for as long
// as the thread lives, which for one of Go's threads is the process's
// life. libgomp counts docked workers among the threads it manages; once
// they outnumber the cores, every team sleeps between regions instead of
// spinning, so that a training at 2 threads later in the same process ran
// at 2,151-2,597 tokens/s against 3,600-3,800 for the same node in a fresh
// process (the main job's distil node, docs/tagger.md, Threads).
//
// BLAS libraries keep a pool of their own. OpenBLAS's pthreads build (what
// Debian's libtorch links) starts one thread per core, and its threads and
// libtorch's OpenMP team both busy-wait between operations, so that with
// both at two threads on two cores they take the cores from each other
// (docs/tagger.md, Threads, has the measurements). So OpenBLAS, where
// the process has it, runs in the calling thread (BLASThreads, set at
// start-up), and the parallelism of an operation is libtorch's alone: a
// matrix product then uses one core, which costs little at this model's
// sizes (two threads bring more to the element-wise and LSTM-step work).

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>

int at_get_num_threads();
void at_set_num_threads(int n_threads);

static void blas_set_num_threads(int n) {
	void (*f)(int) = (void (*)(int))dlsym(RTLD_DEFAULT, "openblas_set_num_threads");
	if (f) f(n);
}

// set_own_threads sets the calling thread's count to n and leaves 1 as
// the count of the threads that never set one. libtorch reads the
// process-wide count into a thread's OpenMP settings once, lazily, on the
// thread's first parallel operation or count query: done here first
// (at_get_num_threads), it cannot undo the thread's own count later. The
// process-wide count then goes to 1 (at_set_num_threads sets it, and the
// calling thread's), and OpenMP's own call puts the calling thread's back
// to n. Without OpenMP in the process the count is libtorch's alone.
static void (*omp_set)(int);

static void find_omp(void) {
	omp_set = (void (*)(int))dlsym(RTLD_DEFAULT, "omp_set_num_threads");
}

static void set_own_threads(int n) {
	at_get_num_threads();
	if (!omp_set) {
		at_set_num_threads(n);
		return;
	}
	at_set_num_threads(1);
	omp_set(n);
}

static int blas_get_num_threads(void) {
	int (*f)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "openblas_get_num_threads");
	return f ? f() : 0;
}
*/
import "C"

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

var (
	// threadsSet is the count SetThreads fixed for the process (0: a fair
	// share of the cores).
	threadsSet atomic.Int32
	// computing counts the trainings and predictions running in this
	// process, which share its cores.
	computing atomic.Int32
	// computingThreads maps the OS thread ids of OnComputeThread's threads
	// to their *computeThread.
	computingThreads sync.Map
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

// BLASThreads is the size of OpenBLAS's own pool, whatever libtorch's
// count (see the top of the file for why).
const BLASThreads = 1

func init() {
	C.blas_set_num_threads(BLASThreads)
	C.find_omp()
}

// setThreads sets the calling OS thread's count, and leaves 1 for the
// threads that never set one (see the top of the file for why).
func setThreads(n int) { C.set_own_threads(C.int(n)) }

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

// OnComputeThread runs a training or prediction, f, on an OS thread of its
// own with its thread count set (computeThreads): a thread that finished
// another computation less than computeIdle ago, or a new one; a thread
// ends after computeIdle without work. f calls refresh now and then (every
// epoch) to follow the number of neighbours. A panic in f is raised again
// in the caller.
//
// Why a thread of its own: libgomp keeps an OpenMP team for every OS thread
// that ran a parallel region, for as long as that thread lives, and counts
// the threads of all teams; once they outnumber the cores, every team stops
// busy-waiting between regions and sleeps instead. A worker that ran its
// nodes on goroutines it merely locked and unlocked kept each node's team
// alive on Go's idle threads, and slowed the next trainings. A goroutine
// that ends locked takes its thread, and libgomp frees the team with it;
// idle threads are reused first, and end soon.
//
// Never the process's main thread, which Go does not end: a training there
// page-faulted several times as often, on heap pages libtorch touched
// fresh (the allocator's arena for that thread is the likely cause, not
// pinned down), and ran slower. A computation that lands there leaves it
// to Go, which parks the main thread for good once its locked goroutine
// ends, and starts on another thread. docs/tagger.md (Threads) has the
// measurements behind both choices.
//
// Called on a computing thread (a prediction inside a training, or a
// server's batching loop that runs on one for its lifetime), it runs f
// right there, with that thread's refresh.
func OnComputeThread(f func(refresh func())) {
	// A goroutine locked to a thread is the only one that thread runs, so
	// finding the current thread among the computing ones means this
	// goroutine owns it.
	if ct := currentComputeThread(); ct != nil {
		f(ct.refresh)
		return
	}
	done := make(chan any, 1)
	job := func(ct *computeThread) (ok bool) {
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Sprintf("%v\n\ngoroutine of the computation:\n%s", p, debug.Stack())
				return
			}
			done <- nil
			ok = true
		}()
		refresh, finished := computeThreads()
		defer finished()
		ct.refresh = refresh
		f(refresh)
		return true
	}
	select {
	case computeJobs <- job: // a thread that finished a computation less than computeIdle ago
	default:
		goOnOwnThread(func() { computeThreadLoop(job) })
	}
	if p := <-done; p != nil {
		panic(p)
	}
}

// computeIdle is how long a compute thread waits for the next computation
// before it ends. Starting one costs milliseconds (libtorch's and OpenMP's
// per-thread set-up), which a server's short predictions would pay on
// every call. A second is short enough that an idle thread's OpenMP team
// is gone before it can crowd the next trainings for long.
const computeIdle = time.Second

// computeJobs hands a computation to a compute thread waiting for one.
var computeJobs = make(chan func(*computeThread) bool)

// computeThreadLoop runs job, then the computations handed to it, on the
// calling goroutine's own locked thread, until none comes for computeIdle
// or one panics (the thread's state is then unknown, and it ends).
func computeThreadLoop(job func(*computeThread) bool) {
	ct := &computeThread{}
	defer ct.close()
	tid := syscall.Gettid()
	computingThreads.Store(tid, ct)
	defer computingThreads.Delete(tid)
	idle := time.NewTimer(computeIdle)
	defer idle.Stop()
	for job(ct) {
		idle.Reset(computeIdle)
		select {
		case job = <-computeJobs:
		case <-idle.C:
			return
		}
	}
}

// goOnOwnThread runs f on a new goroutine locked to an OS thread other
// than the process's main one, and ends that thread when f returns (see
// OnComputeThread for why both).
func goOnOwnThread(f func()) {
	var start func()
	start = func() {
		runtime.LockOSThread() // never unlocked: the thread ends with f
		if syscall.Gettid() == syscall.Getpid() {
			go start()
			return
		}
		f()
	}
	go start()
}

// computeThread is the state of one of OnComputeThread's threads.
type computeThread struct {
	refresh func()
	// LSTMHelper runs prediction's backward LSTM direction
	// (lstm_apart.go), started on first use.
	LSTMHelper *LSTMHelper
}

func (ct *computeThread) close() {
	if ct.LSTMHelper != nil {
		ct.LSTMHelper.stop()
	}
}

// currentComputeThread is the calling goroutine's computeThread, nil when
// it runs on none.
func currentComputeThread() *computeThread {
	if ct, ok := computingThreads.Load(syscall.Gettid()); ok {
		return ct.(*computeThread)
	}
	return nil
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
