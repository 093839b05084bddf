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

// One Adam step on two parameters in two groups, p at 0.1 and q at 0.01:
// each moves by its own group's rate, checked against the update rule
// computed by hand; Update (one rate) moves both alike.
func TestAdamGroupsStepAtTheirOwnRates(t *testing.T) {
	lockThread(t)
	for _, grouped := range []bool{true, false} {
		keep := NewGraph(gotch.CPU)
		p := leaf(t, keep, []float32{1, -2}, 2)
		q := leaf(t, keep, []float32{3, 0.5}, 2)
		opt, err := NewAdam([]string{"p", "q"}, []*ts.Tensor{p, q}, 0)
		if err != nil {
			t.Fatal(err)
		}
		rates := []float64{0.1, 0.1}
		if grouped {
			if err := opt.SetGroup(1, "q"); err != nil {
				t.Fatal(err)
			}
			rates[1] = 0.01
		}
		if err := opt.SetGroup(0, "p"); err == nil {
			t.Error("SetGroup(0) accepted")
		}
		if err := opt.SetGroup(1, "r"); err == nil {
			t.Error("SetGroup accepted a name that is no parameter")
		}
		// Loss c·p + d·q: gradients c and d.
		c, d := []float64{0.5, -4}, []float64{2, -0.25}
		g := NewGraph(gotch.CPU)
		err = Guard(func() {
			lp := g.T(g.T(p.Mul(g.Floats([]float32{0.5, -4}, 2), false)).Sum(gotch.Float, false))
			lq := g.T(g.T(q.Mul(g.Floats([]float32{2, -0.25}, 2), false)).Sum(gotch.Float, false))
			opt.ZeroGrad(g)
			g.Check(g.T(lp.Add(lq, false)).Backward())
			if grouped {
				opt.UpdateGroups(g, []float64{0.1, 0.01})
			} else {
				opt.Update(g, 0.1)
			}
		})
		g.Free()
		if err != nil {
			t.Fatal(err)
		}
		const b1, b2, eps = 0.9, 0.999, 1e-8
		for k, tc := range []struct {
			x     *ts.Tensor
			start []float64
			grad  []float64
		}{{p, []float64{1, -2}, c}, {q, []float64{3, 0.5}, d}} {
			got := Float32s(tc.x)
			for i, gi := range tc.grad {
				mhat := (1 - b1) * gi / (1 - b1)
				vhat := (1 - b2) * gi * gi / (1 - b2)
				want := tc.start[i] - rates[k]*mhat/(math.Sqrt(vhat)+eps)
				near(t, "parameter", float64(got[i]), want, 1e-6)
			}
		}
		// A call with the wrong number of rates is refused.
		g = NewGraph(gotch.CPU)
		if err := Guard(func() { opt.UpdateGroups(g, []float64{0.1, 0.1, 0.1}) }); err == nil {
			t.Error("UpdateGroups took 3 rates for 2 groups")
		}
		g.Free()
		opt.Close()
		keep.Free()
	}
}
