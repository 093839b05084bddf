package train

// libtorch's intra-op thread pool is process-wide. gotch v0.8.0 compiles the
// C functions that read and set it (torch_api.cpp) but wraps neither in Go;
// they are linked into every binary that uses gotch, so they are declared
// and called here directly.

/*
int at_get_num_threads();
void at_set_num_threads(int n_threads);
*/
import "C"

// Threads returns the number of threads libtorch uses for one operation.
func Threads() int { return int(C.at_get_num_threads()) }

// SetThreads sets the number of threads libtorch uses for one operation, for
// the whole process (a worker running several trainings at once may want 1
// each).
func SetThreads(n int) {
	if n > 0 {
		C.at_set_num_threads(C.int(n))
	}
}
