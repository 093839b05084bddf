package allocator

import (
	"os"
	"strings"
	"testing"
)

// The answer must agree with what the process mapped: jemalloc only where
// its library is loaded, and glibc where it is not (this test binary does
// not link gotch, so it has jemalloc only under LD_PRELOAD).
func TestCurrentAgreesWithMappedLibraries(t *testing.T) {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	mapped := strings.Contains(string(maps), "libjemalloc")
	info := Current()
	t.Logf("allocator %s (malloc from %s), jemalloc mapped: %v", info, info.Library, mapped)
	switch {
	case info.Name == "jemalloc" && !mapped:
		t.Errorf("reports jemalloc, but no libjemalloc is mapped")
	case info.Name == "jemalloc" && !strings.HasPrefix(info.Version, "5."):
		t.Errorf("jemalloc version %q: mallctl(\"version\") did not answer a 5.x release", info.Version)
	case info.Name == "jemalloc" && info.OversizeThreshold < 0:
		t.Errorf("jemalloc's opt.oversize_threshold could not be read")
	case info.Name != "jemalloc" && info.OversizeThreshold != -1:
		t.Errorf("OversizeThreshold %d without jemalloc, want -1", info.OversizeThreshold)
	case !mapped && info.Name != "glibc":
		t.Errorf("no jemalloc mapped, yet the allocator is %q (malloc from %q), want glibc", info.Name, info.Library)
	}
	if !strings.Contains(info.String(), info.Name) {
		t.Errorf("String() = %q lacks the name %q", info, info.Name)
	}
}
