package kit

import (
	"math"
	"runtime"
	"slices"
	"testing"

	"github.com/sugarme/gotch"
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

// HostCopies keeps each tensor's values by name, unchanged by later
// in-place steps, and refuses a tensor that is not float32.
func TestHostCopies(t *testing.T) {
	lockThread(t)
	g := NewGraph(gotch.CPU)
	defer g.Free()
	a, b := g.Floats([]float32{1, 2, 3}, 3), g.Floats([]float32{4, 5}, 1, 2)
	got, err := HostCopies([]ts.NamedTensor{{Name: "a", Tensor: a}, {Name: "b", Tensor: b}})
	if err != nil {
		t.Fatal(err)
	}
	if err := Guard(func() { a.MustAdd_(g.Floats([]float32{10, 10, 10}, 3)) }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got["a"], []float32{1, 2, 3}) || !slices.Equal(got["b"], []float32{4, 5}) || len(got) != 2 {
		t.Errorf("host copies %v", got)
	}
	d := ts.MustOnes([]int64{2}, gotch.Double, gotch.CPU)
	g.Keep(d)
	if _, err := HostCopies([]ts.NamedTensor{{Name: "d", Tensor: d}}); err == nil {
		t.Error("a float64 tensor copied as float32")
	}
}
