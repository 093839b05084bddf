package kit

import (
	"math"
	"runtime"
	"testing"

	"github.com/sugarme/gotch/ts"
)

// lockThread pins the test's goroutine to its OS thread, as every goroutine
// that computes with libtorch must be.
func lockThread(t testing.TB) {
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
}

// leaf makes a float32 tensor that requires grad, freed with g.
func leaf(t testing.TB, g *Graph, data []float32, shape ...int64) *ts.Tensor {
	x := g.Floats(data, shape...)
	x, err := x.SetRequiresGrad(true, false)
	if err != nil {
		t.Fatal(err)
	}
	g.Keep(x)
	return x
}

func near(t testing.TB, what string, got, want float64, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol || math.IsNaN(got) {
		t.Errorf("%s = %.8g, want %.8g (±%g)", what, got, want, tol)
	}
}
