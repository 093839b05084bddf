package allocator

import (
	"testing"

	"github.com/nerflow/nerflow/internal/allocator/internal/cheap"
)

// Memory the C heap freed goes back to the kernel: 256 MiB malloc'ed in
// small blocks, touched and freed, leave the resident size high (the
// allocator keeps them) until Release.
func TestReleaseReturnsFreedCMemory(t *testing.T) {
	before := rss(t)
	unpin := cheap.HoldAndFree(256 << 20)
	defer unpin()
	held := rss(t) - before
	if held < 128<<20 {
		t.Skipf("the allocator returned the freed memory by itself (resident +%d MiB after the free): nothing to release", held>>20)
	}
	how, err := Release()
	if err != nil {
		t.Fatal(err)
	}
	after := rss(t)
	t.Logf("%s: resident %d MiB before, %d MiB with the freed memory held, %d MiB after Release", how, before>>20, (before+held)>>20, after>>20)
	if after > before+64<<20 {
		t.Errorf("after %s the process keeps %d MiB more than before the allocation", how, (after-before)>>20)
	}
	want := "malloc_trim"
	if Current().Name == "jemalloc" {
		want = "jemalloc purge"
	}
	if how != want {
		t.Errorf("Release did %q with %s serving malloc, want %q", how, Current(), want)
	}
}

func rss(t *testing.T) int64 {
	t.Helper()
	n := Resident()
	if n == 0 {
		t.Skip("no VmRSS in /proc/self/status")
	}
	return n
}
