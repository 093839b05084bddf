// Package allocator tells which C allocator serves this process: jemalloc
// where scripts/gotch-adapt.sh linked it (libtorch's tensors then live in
// its heap), glibc's malloc otherwise.
package allocator

/*
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>

typedef int (*nerflow_mallctl_fn)(const char *, void *, size_t *, void *, size_t);

// nerflow_malloc_library is the file of the shared object whose malloc the
// process's global symbol scope resolves to: the one libtorch's calls reach.
static const char *nerflow_malloc_library(void) {
	Dl_info info;
	void *m = dlsym(RTLD_DEFAULT, "malloc");
	if (m == NULL || dladdr(m, &info) == 0) return NULL;
	return info.dli_fname;
}

// nerflow_jemalloc_version asks jemalloc's mallctl for its version; NULL
// where no mallctl is loaded.
static const char *nerflow_jemalloc_version(void) {
	nerflow_mallctl_fn ctl = (nerflow_mallctl_fn)dlsym(RTLD_DEFAULT, "mallctl");
	const char *v = NULL;
	size_t n = sizeof v;
	if (ctl == NULL || ctl("version", &v, &n, NULL, 0) != 0) return NULL;
	return v;
}

// nerflow_jemalloc_oversize reads jemalloc's opt.oversize_threshold
// (-1 without jemalloc): whether malloc_conf.c took effect.
static long long nerflow_jemalloc_oversize(void) {
	nerflow_mallctl_fn ctl = (nerflow_mallctl_fn)dlsym(RTLD_DEFAULT, "mallctl");
	size_t v = 0, n = sizeof v;
	if (ctl == NULL || ctl("opt.oversize_threshold", &v, &n, NULL, 0) != 0) return -1;
	return (long long)v;
}
*/
import "C"

import (
	"path/filepath"
	"strings"
)

// Info describes the allocator in use.
type Info struct {
	Name    string // "jemalloc", "glibc", the library's base name when it is neither, "unknown" when dladdr cannot tell
	Version string // jemalloc's version ("5.3.0"); empty for glibc
	Library string // the shared object that defines malloc, as the dynamic linker loaded it
	// OversizeThreshold is jemalloc's opt.oversize_threshold in bytes
	// (malloc_conf.c sets 0); -1 without jemalloc.
	OversizeThreshold int64
}

// String is "jemalloc 5.3.0" or "glibc".
func (i Info) String() string {
	if i.Version == "" {
		return i.Name
	}
	return i.Name + " " + i.Version
}

// Current inspects the running process.
func Current() Info {
	info := Info{OversizeThreshold: -1}
	if lib := C.nerflow_malloc_library(); lib != nil {
		info.Library = C.GoString(lib)
	}
	base := filepath.Base(info.Library)
	switch {
	case strings.Contains(base, "jemalloc"):
		info.Name = "jemalloc"
		if v := C.nerflow_jemalloc_version(); v != nil {
			// "5.3.0-0-g54eaed1d..." : the release is enough.
			info.Version, _, _ = strings.Cut(C.GoString(v), "-")
		}
		info.OversizeThreshold = int64(C.nerflow_jemalloc_oversize())
	case strings.HasPrefix(base, "libc.so"):
		info.Name = "glibc"
	case info.Library == "":
		info.Name = "unknown"
	default:
		info.Name = base
	}
	return info
}
