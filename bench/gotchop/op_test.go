package gotchop

import (
	"runtime"
	"testing"
	"time"

	"github.com/sugarme/gotch"
	lib "github.com/sugarme/gotch/libtch"
	"github.com/sugarme/gotch/ts"
)

// BenchmarkSmallOp adds two [32, 9] tensors (one time step of a CRF's
// forward algorithm over a batch of 32 with 9 tags) b.N times through gotch
// (ts.Tensor.Add, then Drop) and b.N times through libtch (atg_add, then
// at_free), interleaved in rounds, and reports both costs per operation,
// their ratio and the Go memory the wrapper allocates per operation.
func BenchmarkSmallOp(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	x, err := ts.Rand([]int64{32, 9}, gotch.Float, gotch.CPU)
	if err != nil {
		b.Fatal(err)
	}
	defer x.Drop()
	y, err := ts.Rand([]int64{32, 9}, gotch.Float, gotch.CPU)
	if err != nil {
		b.Fatal(err)
	}
	defer y.Drop()

	wrapped := func(n int) {
		for range n {
			z, err := x.Add(y, false)
			if err != nil {
				b.Fatal(err)
			}
			z.Drop()
		}
	}
	out := new(lib.Ctensor)
	xc, yc := lib.Ctensor(x.Ctensor()), lib.Ctensor(y.Ctensor())
	raw := func(n int) {
		for range n {
			lib.AtgAdd(out, xc, yc)
			if err := ts.TorchErr(); err != nil {
				b.Fatal(err)
			}
			lib.AtFree(*out)
		}
	}

	const rounds = 4
	wrapped(100) // warm-up: libtorch's dispatcher, Go's heap
	raw(100)
	var ms0, ms1 runtime.MemStats
	var tWrapped, tRaw time.Duration
	var goBytes uint64
	b.ResetTimer()
	for r := range rounds {
		n := b.N / rounds
		if r == rounds-1 {
			n = b.N - n*(rounds-1)
		}
		runtime.ReadMemStats(&ms0)
		start := time.Now()
		wrapped(n)
		tWrapped += time.Since(start)
		runtime.ReadMemStats(&ms1)
		goBytes += ms1.TotalAlloc - ms0.TotalAlloc
		start = time.Now()
		raw(n)
		tRaw += time.Since(start)
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(tWrapped.Nanoseconds())/n, "gotch-ns/op")
	b.ReportMetric(float64(tRaw.Nanoseconds())/n, "libtch-ns/op")
	b.ReportMetric(tWrapped.Seconds()/tRaw.Seconds(), "gotch/libtch")
	b.ReportMetric(float64(goBytes)/n, "gotch-Go-B/op")
}
