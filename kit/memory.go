package kit

import (
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/nerflow/nerflow/internal/allocator"
)

// AllocatorName is the C allocator that serves libtorch's memory in this
// process ("jemalloc 5.3.0" where scripts/gotch-adapt.sh linked it,
// "glibc" otherwise): trainings log it, since the resident sizes per epoch
// depend on it (docs/tagger.md, "Memory").
var AllocatorName = sync.OnceValue(func() string { return allocator.Current().String() })

// ResidentBytes is the process's resident memory now (VmRSS), in bytes; 0
// where /proc cannot tell. Trainings report it per epoch: libtorch's memory
// is invisible to Go's own statistics, and a leak or an allocator that
// keeps freed memory shows up there first.
func ResidentBytes() int64 {
	return procStatus("VmRSS:")
}

// PeakResidentBytes is the process's peak resident memory (VmHWM).
func PeakResidentBytes() int64 {
	return procStatus("VmHWM:")
}

func procStatus(field string) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
