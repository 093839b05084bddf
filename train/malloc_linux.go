//go:build linux

package train

/*
#include <malloc.h>
*/
import "C"

import (
	"log/slog"
	"os"
	"strings"
)

// mallocTuned says whether init set the allocator (see there).
var mallocTuned bool

// glibc's allocator with its defaults lets a training process grow from
// epoch to epoch: each thread that allocates (the training's, libtorch's
// OpenMP and OpenBLAS workers) may get an arena of its own, and glibc raises
// its mmap threshold as large blocks are freed, after which activations of
// varying sizes fragment the heap. Measured in BenchmarkTrainMemory and in
// `nerflow train` (docs/tagger.md, "Memory"), one arena, a fixed 32 MB mmap
// threshold and a high trim threshold keep the resident memory flat and the
// kernel out of the step (no page faults for memory freed and reallocated at
// every step), at the price of keeping the peak once reached. They are set
// when the process starts unless NERFLOW_MALLOC=system or any MALLOC_*
// variable of glibc's is set (which then rules, as glibc reads them itself).
func init() {
	if os.Getenv("NERFLOW_MALLOC") == "system" {
		return
	}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "MALLOC_") || strings.HasPrefix(kv, "GLIBC_TUNABLES=") {
			return
		}
	}
	mallocTuned = C.mallopt(C.M_ARENA_MAX, 1) == 1 &&
		C.mallopt(C.M_MMAP_THRESHOLD, 32<<20) == 1 &&
		C.mallopt(C.M_TRIM_THRESHOLD, 1<<30) == 1
	if !mallocTuned {
		slog.Debug("mallopt refused the allocator settings; glibc's defaults stay")
	}
}

// mallocEnv is the environment that gives another process (the benchmarks'
// PyTorch reference) the allocator settings of this one.
func mallocEnv() []string {
	if !mallocTuned {
		return nil
	}
	return []string{"MALLOC_ARENA_MAX=1", "MALLOC_MMAP_THRESHOLD_=33554432", "MALLOC_TRIM_THRESHOLD_=1073741824"}
}
