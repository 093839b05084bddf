package train

import (
	"fmt"
	"math"
	"runtime"
	"slices"

	"github.com/sugarme/gotch/ts"
)

// adam is the Adam optimizer (Kingma and Ba, 2015) over a tagger's
// parameters. gotch wraps libtorch's optimizers, but their moment estimates
// stay inside libtorch where no checkpoint can reach them; kept in tensors
// here, they are saved with the weights, so a resumed run continues exactly
// where it stopped.
//
// A step creates as few gotch tensors as possible: the gradient handles are kept from step to step (libtorch
// accumulates into the same gradient tensor as long as it is defined), and
// the denominator is computed in a scratch tensor per parameter, in place.
type adam struct {
	names        []string
	params       []*ts.Tensor
	m, v         []*ts.Tensor
	grads        []*ts.Tensor // handles on the parameters' gradients, nil until defined
	scratch      []*ts.Tensor
	step         int
	beta1, beta2 float64
	eps          float64
	lastGradNorm float64 // NaN when clipping on the device
	maxGradNorm  float64 // 0: no clipping
	// clipOnDevice computes the clipping coefficient on the parameters'
	// device instead of reading the norm back: on a GPU a read-back waits
	// for every queued kernel, so the host could not run ahead of the
	// device. It costs one more pass over the gradients (the coefficient
	// is applied even when it is 1), which a CPU would only lose.
	clipOnDevice bool
}

func newAdam(m *Tagger, maxGradNorm float64) (*adam, error) {
	named := m.namedWeights()
	names := make([]string, len(named))
	params := make([]*ts.Tensor, len(named))
	for i, nt := range named {
		names[i], params[i] = nt.Name, nt.Tensor
	}
	return newAdamFor(names, params, maxGradNorm)
}

// newAdamFor optimizes params, named for checkpoints.
func newAdamFor(names []string, params []*ts.Tensor, maxGradNorm float64) (*adam, error) {
	a := &adam{names: names, params: params, beta1: 0.9, beta2: 0.999, eps: 1e-8, maxGradNorm: maxGradNorm,
		grads: make([]*ts.Tensor, len(params))}
	if len(params) > 0 {
		if d, err := params[0].Device(); err == nil && d.IsCuda() {
			a.clipOnDevice = true
		}
	}
	err := run(func() {
		for _, p := range params {
			a.m = append(a.m, zerosLike(p))
			a.v = append(a.v, zerosLike(p))
			a.scratch = append(a.scratch, zerosLike(p))
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
	for _, x := range slices.Concat(a.m, a.v, a.scratch, a.grads) {
		if x != nil {
			_ = x.Drop()
		}
	}
	a.m, a.v, a.scratch, a.grads = nil, nil, nil, nil
}

// grad returns the handle on parameter i's gradient, nil while it has none.
func (a *adam) grad(i int) *ts.Tensor {
	if a.grads[i] != nil {
		return a.grads[i]
	}
	gr, err := a.params[i].Grad(false)
	if err != nil {
		panic(torchError{err})
	}
	if defined, _ := gr.Defined(); !defined {
		_ = gr.Drop()
		return nil
	}
	a.grads[i] = gr
	return gr
}

// noGrad runs f with gradient tracking off, and puts the previous mode
// back after: a computation without gradient may run inside another (a
// tagger's frozen language model inside its prediction, or inside a
// training step). libtorch's grad mode belongs to the OS thread, so noGrad
// holds the goroutine on its thread meanwhile (else it could turn tracking
// off on one thread and back on on another, and a later training on the
// first would fail).
func noGrad(f func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	prev := setGradEnabled(false)
	defer setGradEnabled(prev)
	f()
}

// zeroGrad clears the gradients the last backward pass accumulated.
func (a *adam) zeroGrad(g *graph) {
	for i := range a.params {
		if gr := a.grad(i); gr != nil {
			g.check(gr.Zero_())
		}
	}
}

// update clips the gradients to a global L2 norm of maxGradNorm and takes
// one Adam step with learning rate lr:
//
//	m = b1 m + (1-b1) g,  v = b2 v + (1-b2) g²
//	p -= lr/(1-b1^t) · m / (sqrt(v/(1-b2^t)) + eps)
//
// Everything is computed in place: a fresh allocation of a large tensor
// costs a page fault per 4 KB (tens of milliseconds for the word vectors on
// a VM).
func (a *adam) update(g *graph, lr float64) {
	noGrad(func() {
		// The global norm is read back once (on a GPU each read waits for
		// the device).
		var norms []*ts.Tensor
		for i := range a.params {
			if gr := a.grad(i); gr != nil {
				norms = append(norms, g.t(gr.Norm(false)))
			}
		}
		a.lastGradNorm = 0
		scale := 1.0
		switch {
		case len(norms) == 0:
		case a.clipOnDevice && a.maxGradNorm > 0:
			// coef = min(1, max / (norm + 1e-6)), as torch.nn.utils.clip_grad_norm_.
			total := g.t(g.t(ts.Stack(norms, 0)).Norm(false))
			coef := g.t(g.t(g.t(total.AddScalar(g.scalar(1e-6), false)).Reciprocal(false)).MulScalar(g.scalar(a.maxGradNorm), false))
			g.check(coef.ClampMax_(g.scalar(1)))
			for i := range a.params {
				if gr := a.grad(i); gr != nil {
					g.check(gr.Mul_(coef))
				}
			}
			a.lastGradNorm = math.NaN()
		default:
			a.lastGradNorm = scalar(g.t(g.t(ts.Stack(norms, 0)).Norm(false)))
			if a.maxGradNorm > 0 && a.lastGradNorm > a.maxGradNorm {
				scale = a.maxGradNorm / (a.lastGradNorm + 1e-6)
			}
		}
		a.step++
		bc1 := 1 - math.Pow(a.beta1, float64(a.step))
		bc2 := 1 - math.Pow(a.beta2, float64(a.step))
		f := g.scalar
		for i, p := range a.params {
			gr := a.grad(i)
			if gr == nil {
				continue // a parameter no loss has reached yet
			}
			if scale != 1 {
				g.check(gr.MulScalar_(f(scale)))
			}
			m, v, d := a.m[i], a.v[i], a.scratch[i]
			g.check(m.Lerp_(gr, f(1-a.beta1))) // m + (1-b1)(g-m)
			// v = v + (1-b2)(g² - v): g² into the scratch, then one lerp —
			// two passes over v's size instead of the three of
			// mul, addcmul, mul (gotch's addcmul has no scale).
			g.t(gr.MulOut(d, gr, false))
			g.check(v.Lerp_(d, f(1-a.beta2)))
			if lr == 0 {
				continue
			}
			// p += m / d with d = -(bc1/lr) (sqrt(v)/sqrt(bc2) + eps)
			//                   = -(bc1/(lr sqrt(bc2))) (sqrt(v) + eps sqrt(bc2)):
			// four passes over d, the square root written straight into it.
			g.t(v.SqrtOut(d, false))
			g.check(d.AddScalar_(f(a.eps * math.Sqrt(bc2))))
			g.check(d.MulScalar_(f(-bc1 / (lr * math.Sqrt(bc2)))))
			g.check(p.Addcdiv_(m, d))
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
