package kit

import (
	"math"
	"math/rand/v2"
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

// Dropout zeroes about p of the elements and scales the others by
// 1/(1-p), and its gradient is the mask, whether the mask comes from the
// host's generator or from libtorch's (the path a GPU takes).
func TestDropout(t *testing.T) {
	lockThread(t)
	const n, p = 20000, 0.3
	for _, device := range []bool{false, true} {
		g := NewGraph(gotch.CPU)
		g.deviceMasks = device
		ones := make([]float32, n)
		for i := range ones {
			ones[i] = 1
		}
		x := leaf(t, g, ones, n)
		var y, grad []float32
		err := Guard(func() {
			out := g.Dropout(x, p, rand.New(rand.NewPCG(1, 2)))
			g.Check(g.T(out.Sum(gotch.Float, false)).Backward())
			y = Float32s(out)
			grad = Float32s(g.T(x.Grad(false)))
		})
		g.Free()
		if err != nil {
			t.Fatal(err)
		}
		dropped := 0
		for i, v := range y {
			switch {
			case v == 0:
				dropped++
			case math.Abs(float64(v)-1/(1-p)) > 1e-5:
				t.Fatalf("device masks %v: element %d is %v, want 0 or %v", device, i, v, 1/(1-p))
			}
			if grad[i] != v {
				t.Fatalf("device masks %v: gradient %v at %d where the output is %v", device, grad[i], i, v)
			}
		}
		// 20,000 draws: the dropped share's spread is about 0.003.
		near(t, "dropped share", float64(dropped)/n, p, 0.015)
	}
}
