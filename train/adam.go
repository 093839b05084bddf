package train

import (
	"fmt"
	"math"
	"slices"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/ts"
)

// adam is the Adam optimizer (Kingma and Ba, 2015) over a tagger's
// parameters. gotch wraps libtorch's optimizers, but their moment estimates
// stay inside libtorch where no checkpoint can reach them; kept in tensors
// here, they are saved with the weights, so a resumed run continues exactly
// where it stopped.
type adam struct {
	names        []string
	params       []*ts.Tensor
	m, v         []*ts.Tensor
	step         int
	beta1, beta2 float64
	eps          float64
	device       gotch.Device
	lastGradNorm float64
	maxGradNorm  float64 // 0: no clipping
}

func newAdam(m *Tagger, maxGradNorm float64) (*adam, error) {
	a := &adam{beta1: 0.9, beta2: 0.999, eps: 1e-8, device: m.device, maxGradNorm: maxGradNorm}
	vars := m.vs.Variables()
	for name := range vars {
		a.names = append(a.names, name)
	}
	slices.Sort(a.names)
	err := run(func() {
		for _, name := range a.names {
			p, err := m.vs.Root().Get(name)
			if err != nil {
				panic(torchError{err})
			}
			a.params = append(a.params, p)
			a.m = append(a.m, zerosLike(p))
			a.v = append(a.v, zerosLike(p))
		}
	})
	if err != nil {
		a.close()
		return nil, err
	}
	return a, nil
}

func zerosLike(p *ts.Tensor) *ts.Tensor {
	z, err := p.ZerosLike(false)
	if err != nil {
		panic(torchError{err})
	}
	return z
}

func (a *adam) close() {
	for _, x := range slices.Concat(a.m, a.v) {
		_ = x.Drop()
	}
	a.m, a.v = nil, nil
}

// noGrad runs f with gradient tracking off on this OS thread, and turns it
// back on after. (It cannot restore "the previous state": gotch v0.8.0's
// GradSetEnabled reads the C int it gets back as a Go int, 8 bytes, and
// returns garbage for it. Nothing here computes with tracking off outside
// noGrad, so on is always right.)
func noGrad(f func()) {
	if _, err := ts.GradSetEnabled(false); err != nil {
		panic(torchError{err})
	}
	defer ts.GradSetEnabled(true)
	f()
}

// zeroGrad clears the gradients the last backward pass accumulated.
func (a *adam) zeroGrad(g *graph) {
	for _, p := range a.params {
		grad := g.t(p.Grad(false))
		if defined, _ := grad.Defined(); defined {
			g.check(grad.Zero_())
		}
	}
}

// update clips the gradients to a global L2 norm of maxGradNorm and takes
// one Adam step with learning rate lr:
//
//	m = b1 m + (1-b1) g,  v = b2 v + (1-b2) g²
//	p -= lr/(1-b1^t) · m / (sqrt(v/(1-b2^t)) + eps)
func (a *adam) update(g *graph, lr float64) {
	noGrad(func() {
		grads := make([]*ts.Tensor, len(a.params))
		var sq *ts.Tensor
		for i, p := range a.params {
			grads[i] = g.t(p.Grad(false))
			if defined, _ := grads[i].Defined(); !defined {
				grads[i] = nil // a parameter the loss did not reach
				continue
			}
			s := g.t(g.t(grads[i].Square(false)).Sum(gotch.Float, false))
			if sq == nil {
				sq = s
			} else {
				sq = g.t(sq.Add(s, false))
			}
		}
		if sq == nil {
			return
		}
		a.lastGradNorm = math.Sqrt(scalar(sq))
		scale := 1.0
		if a.maxGradNorm > 0 && a.lastGradNorm > a.maxGradNorm {
			scale = a.maxGradNorm / (a.lastGradNorm + 1e-6)
		}
		a.step++
		bc1 := 1 - math.Pow(a.beta1, float64(a.step))
		bc2 := 1 - math.Pow(a.beta2, float64(a.step))
		for i, p := range a.params {
			gr := grads[i]
			if gr == nil {
				continue
			}
			if scale != 1 {
				gr = g.t(gr.MulScalar(ts.FloatScalar(scale), false))
			}
			g.check(a.m[i].MulScalar_(ts.FloatScalar(a.beta1)))
			g.check(a.m[i].Add_(g.t(gr.MulScalar(ts.FloatScalar(1-a.beta1), false))))
			g.check(a.v[i].MulScalar_(ts.FloatScalar(a.beta2)))
			g.check(a.v[i].Addcmul_(g.t(gr.MulScalar(ts.FloatScalar(1-a.beta2), false)), gr))
			denom := g.t(g.t(a.v[i].Sqrt(false)).MulScalar(ts.FloatScalar(1/math.Sqrt(bc2)), false))
			denom = g.t(denom.AddScalar(ts.FloatScalar(a.eps), false))
			step := g.t(g.t(a.m[i].Div(denom, false)).MulScalar(ts.FloatScalar(-lr/bc1), false))
			g.check(p.Add_(step))
		}
	})
}

// state returns the moments as named tensors for a checkpoint.
func (a *adam) state() []ts.NamedTensor {
	var out []ts.NamedTensor
	for i, name := range a.names {
		out = append(out, ts.NamedTensor{Name: "m." + name, Tensor: a.m[i]}, ts.NamedTensor{Name: "v." + name, Tensor: a.v[i]})
	}
	return out
}

// restore copies moments saved by state.
func (a *adam) restore(saved []ts.NamedTensor, step int) error {
	byName := map[string]*ts.Tensor{}
	for _, nt := range saved {
		byName[nt.Name] = nt.Tensor
	}
	for i, name := range a.names {
		for _, dst := range []struct {
			prefix string
			t      *ts.Tensor
		}{{"m.", a.m[i]}, {"v.", a.v[i]}} {
			src, ok := byName[dst.prefix+name]
			if !ok {
				return fmt.Errorf("optimizer state has no %s%s", dst.prefix, name)
			}
			if err := copyInto(dst.t, src); err != nil {
				return fmt.Errorf("optimizer state %s%s: %w", dst.prefix, name, err)
			}
		}
	}
	a.step = step
	return nil
}

// copyInto copies src into dst after checking their shapes agree (gotch's
// Copy_ exits the process on a mismatch).
func copyInto(dst, src *ts.Tensor) error {
	ds, err := dst.Size()
	if err != nil {
		return err
	}
	ss, err := src.Size()
	if err != nil {
		return err
	}
	if !slices.Equal(ds, ss) || dst.DType() != src.DType() {
		return fmt.Errorf("shape %v %v, want %v %v", ss, src.DType(), ds, dst.DType())
	}
	return run(func() { noGrad(func() { dst.Copy_(src) }) })
}

// learningRate is the schedule: linear warm-up over warmup steps to peak,
// then linear decay to 0 at total steps.
func learningRate(peak float64, step, warmup, total int) float64 {
	if step < warmup {
		return peak * float64(step+1) / float64(warmup)
	}
	if total <= warmup {
		return peak
	}
	return peak * max(0, float64(total-step)/float64(total-warmup))
}
