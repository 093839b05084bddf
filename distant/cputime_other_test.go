//go:build !linux

package distant

import "time"

// threadCPU is not measured off Linux; benchmarks then report wall time only.
func threadCPU() time.Duration { return 0 }
