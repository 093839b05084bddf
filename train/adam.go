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
		grad, err := p.Grad(false)
		g.check(err)
		if defined, _ := grad.Defined(); defined {
			g.inPlace(grad, grad.Zero_)
		}
		grad.Drop()
	}
}

// update clips the gradients to a global L2 norm of maxGradNorm and takes
// one Adam step with learning rate lr:
//
//	m = b1 m + (1-b1) g,  v = b2 v + (1-b2) g²
//	p -= lr/(1-b1^t) · m / (sqrt(v/(1-b2^t)) + eps)
//
// Everything is computed in place but one temporary per parameter, freed at
// once: a fresh allocation of a large tensor costs a page fault per 4 KB
// (tens of milliseconds for the word vectors on a VM), while memory freed
// right away is reused by the allocator.
func (a *adam) update(g *graph, lr float64) {
	noGrad(func() {
		grads := make([]*ts.Tensor, len(a.params))
		sumSq := 0.0
		for i, p := range a.params {
			gr := g.t(p.Grad(false))
			if defined, _ := gr.Defined(); !defined {
				continue // a parameter the loss did not reach
			}
			grads[i] = gr
			norm := scalar(g.t(gr.Norm(false)))
			sumSq += norm * norm
		}
		a.lastGradNorm = math.Sqrt(sumSq)
		scale := 1.0
		if a.maxGradNorm > 0 && a.lastGradNorm > a.maxGradNorm {
			scale = a.maxGradNorm / (a.lastGradNorm + 1e-6)
		}
		a.step++
		bc1 := 1 - math.Pow(a.beta1, float64(a.step))
		bc2 := 1 - math.Pow(a.beta2, float64(a.step))
		f := ts.FloatScalar
		for i, p := range a.params {
			gr := grads[i]
			if gr == nil {
				continue
			}
			if scale != 1 {
				g.inPlace(gr, func() error { return gr.MulScalar_(f(scale)) })
			}
			m, v := a.m[i], a.v[i]
			g.inPlace(m, func() error { return m.Lerp_(gr, f(1-a.beta1)) }) // m + (1-b1)(g-m)
			// v = (1-b2) (v b2/(1-b2) + g²), in place
			g.inPlace(v, func() error { return v.MulScalar_(f(a.beta2 / (1 - a.beta2))) })
			g.inPlace(v, func() error { return v.Addcmul_(gr, gr) })
			g.inPlace(v, func() error { return v.MulScalar_(f(1 - a.beta2)) })
			if lr == 0 {
				continue
			}
			// p += m / d with d = -(bc1/lr) (sqrt(v)/sqrt(bc2) + eps); d
			// is dropped at once so that the next parameter reuses its
			// memory.
			d, err := v.Sqrt(false)
			g.check(err)
			g.inPlace(d, func() error { return d.MulScalar_(f(1 / math.Sqrt(bc2))) })
			g.inPlace(d, func() error { return d.AddScalar_(f(a.eps)) })
			g.inPlace(d, func() error { return d.MulScalar_(f(-bc1 / lr)) })
			g.inPlace(p, func() error { return p.Addcdiv_(m, d) })
			d.Drop()
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
