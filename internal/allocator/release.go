package allocator

/*
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <stddef.h>
#include <stdio.h>

typedef int (*nerflow_release_mallctl_fn)(const char *, void *, size_t *, void *, size_t);

// nerflow_release hands the free memory of the C heap back to the kernel:
// jemalloc's purge of every arena (MALLCTL_ARENAS_ALL is 4096) where
// jemalloc serves malloc, glibc's malloc_trim otherwise. It returns 1 for
// a jemalloc purge, 2 for malloc_trim, -1 when jemalloc refused.
static int nerflow_release(void) {
	nerflow_release_mallctl_fn ctl = (nerflow_release_mallctl_fn)dlsym(RTLD_DEFAULT, "mallctl");
	if (ctl != NULL) {
		char name[32];
		snprintf(name, sizeof name, "arena.%u.purge", 4096u);
		return ctl(name, NULL, NULL, NULL, 0) == 0 ? 1 : -1;
	}
	malloc_trim(0);
	return 2;
}
*/
import "C"

import (
	"errors"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// Release hands the memory this process holds but no longer uses back to
// the system: Go's free heap (debug.FreeOSMemory) and the C allocator's
// free pages, where libtorch's tensors lived. A worker calls it when its
// last node has ended: jemalloc returns freed pages only as it allocates
// again (its decay runs on allocation events), and glibc keeps its arenas'
// free memory, so an idle worker would keep the peak of its last training
// resident until its next node. It reports what it asked of the C
// allocator: "jemalloc purge" or "malloc_trim".
func Release() (string, error) {
	debug.FreeOSMemory()
	switch C.nerflow_release() {
	case 1:
		return "jemalloc purge", nil
	case 2:
		return "malloc_trim", nil
	}
	return "jemalloc purge", errors.New("allocator: jemalloc refused mallctl arena.4096.purge")
}

// Resident is the process's resident memory (VmRSS) in bytes; 0 where
// /proc cannot tell.
func Resident() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
