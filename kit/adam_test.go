package kit

import (
	"math"
	"testing"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/ts"
)

// Two Adam steps on p = [1, -2, 3]: first with loss c·p (gradient c), then
// with loss |p|²/2 (gradient p), checked against the update rule computed by
// hand in float64.
// Clipping runs on the host and, as on a GPU, on the device.
func TestAdamMatchesTheUpdateRule(t *testing.T) {
	for _, tc := range []struct {
		clip         float64
		clipOnDevice bool
	}{{0, false}, {1, false}, {1, true}, {100, true}} {
		clip := tc.clip
		lockThread(t)
		keep := NewGraph(gotch.CPU)
		p := leaf(t, keep, []float32{1, -2, 3}, 3)
		opt, err := NewAdam([]string{"p"}, []*ts.Tensor{p}, clip)
		if err != nil {
			t.Fatal(err)
		}
		opt.clipOnDevice = tc.clipOnDevice
		c := []float64{0.5, -1, 2}
		const lr, b1, b2, eps = 0.1, 0.9, 0.999, 1e-8
		want := []float64{1, -2, 3}
		m, v := make([]float64, 3), make([]float64, 3)
		for step := 1; step <= 2; step++ {
			grad := c
			if step == 2 {
				grad = append([]float64(nil), want...)
			}
			// Clipping scales the gradient to norm <= clip.
			norm := math.Sqrt(grad[0]*grad[0] + grad[1]*grad[1] + grad[2]*grad[2])
			scale := 1.0
			if clip > 0 && norm > clip {
				scale = clip / (norm + 1e-6)
			}
			for i := range want {
				gi := grad[i] * scale
				m[i] = b1*m[i] + (1-b1)*gi
				v[i] = b2*v[i] + (1-b2)*gi*gi
				mhat := m[i] / (1 - math.Pow(b1, float64(step)))
				vhat := v[i] / (1 - math.Pow(b2, float64(step)))
				want[i] -= lr * mhat / (math.Sqrt(vhat) + eps)
			}

			g := NewGraph(gotch.CPU)
			err := Guard(func() {
				var loss *ts.Tensor
				if step == 1 {
					loss = g.T(g.T(p.Mul(g.Floats([]float32{0.5, -1, 2}, 3), false)).Sum(gotch.Float, false))
				} else {
					loss = g.T(g.T(g.T(p.Square(false)).Sum(gotch.Float, false)).MulScalar(ts.FloatScalar(0.5), false))
				}
				opt.ZeroGrad(g)
				g.Check(loss.Backward())
				opt.Update(g, lr)
			})
			g.Free()
			if err != nil {
				t.Fatal(err)
			}
			if !tc.clipOnDevice {
				near(t, "gradient norm", opt.lastGradNorm, norm, 1e-5)
			}
			got := Float32s(p)
			for i := range want {
				near(t, "parameter", float64(got[i]), want[i], 1e-5)
			}
			gotM := Float32s(opt.m[0])
			for i := range m {
				near(t, "first moment", float64(gotM[i]), m[i], 1e-6)
			}
		}

		// zeroGrad clears the gradient libtorch accumulates into (a fresh
		// handle sees zeros).
		g := NewGraph(gotch.CPU)
		if err := Guard(func() { opt.ZeroGrad(g) }); err != nil {
			t.Fatal(err)
		}
		for i, x := range Float32s(g.T(p.Grad(false))) {
			if x != 0 {
				t.Fatalf("gradient %d is %v after zeroGrad", i, x)
			}
		}
		g.Free()
		opt.Close()
		keep.Free()
	}
}
