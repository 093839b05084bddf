package distant

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU returns the CPU time used so far by the calling OS thread. On a
// machine shared with other work, a benchmark that locks its goroutine to a
// thread and divides by this time measures the code, not the neighbours.
func threadCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
