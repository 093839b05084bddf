package kit

import (
	"fmt"
	"math"
	"slices"

	"github.com/sugarme/gotch/ts"
)

// Adam is the Adam optimizer (Kingma and Ba, 2015) over any named
// parameters, with global-norm clipping. gotch wraps libtorch's optimizers, but their moment estimates
// stay inside libtorch where no checkpoint can reach them; kept in tensors
// here, they are saved with the weights, so a resumed run continues exactly
// where it stopped.
//
// A step creates as few gotch tensors as possible: the gradient handles are kept from step to step (libtorch
// accumulates into the same gradient tensor as long as it is defined), and
// the denominator is computed in a scratch tensor per parameter, in place.
type Adam struct {
	names  []string
	params []*ts.Tensor
	// group is each parameter's group (SetGroup): the index of its
	// learning rate in UpdateGroups' rates; 0 for all by default.
	group        []int
	groups       int // the number of groups, at least 1
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

// NewAdam optimizes params, named for checkpoints (State), clipping the
// gradients to a global L2 norm of maxGradNorm (0: no clipping).
func NewAdam(names []string, params []*ts.Tensor, maxGradNorm float64) (*Adam, error) {
	a := &Adam{names: names, params: params, beta1: 0.9, beta2: 0.999, eps: 1e-8, maxGradNorm: maxGradNorm,
		grads: make([]*ts.Tensor, len(params)), group: make([]int, len(params)), groups: 1}
	if len(params) > 0 {
		if d, err := params[0].Device(); err == nil && d.IsCuda() {
			a.clipOnDevice = true
		}
	}
	err := Guard(func() {
		for _, p := range params {
			a.m = append(a.m, zerosLike(p))
			a.v = append(a.v, zerosLike(p))
			a.scratch = append(a.scratch, zerosLike(p))
		}
	})
	if err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

func zerosLike(p *ts.Tensor) *ts.Tensor {
	z, err := p.ZerosLike(false)
	if err != nil {
		Abort(err)
	}
	return z
}

// Close frees the moments.
func (a *Adam) Close() {
	for _, x := range slices.Concat(a.m, a.v, a.scratch, a.grads) {
		if x != nil {
			_ = x.Drop()
		}
	}
	a.m, a.v, a.scratch, a.grads = nil, nil, nil, nil
}

// grad returns the handle on parameter i's gradient, nil while it has none.
func (a *Adam) grad(i int) *ts.Tensor {
	if a.grads[i] != nil {
		return a.grads[i]
	}
	gr, err := a.params[i].Grad(false)
	if err != nil {
		Abort(err)
	}
	if defined, _ := gr.Defined(); !defined {
		_ = gr.Drop()
		return nil
	}
	a.grads[i] = gr
	return gr
}

// ZeroGrad clears the gradients the last backward pass accumulated.
func (a *Adam) ZeroGrad(g *Graph) {
	for i := range a.params {
		if gr := a.grad(i); gr != nil {
			g.Check(gr.Zero_())
		}
	}
}

// SetGroup puts the named parameters into parameter group k (k >= 1; every
// parameter starts in group 0), which UpdateGroups steps at a learning
// rate of its own: a pretrained encoder fine-tuned under a freshly
// initialized head learns more slowly than the head. Clipping stays global
// over all groups.
func (a *Adam) SetGroup(k int, names ...string) error {
	if k < 1 {
		return fmt.Errorf("optimizer: group %d: groups beyond the default one count from 1", k)
	}
	index := make(map[string]int, len(a.names))
	for i, n := range a.names {
		index[n] = i
	}
	for _, n := range names {
		i, ok := index[n]
		if !ok {
			return fmt.Errorf("optimizer: group %d: no parameter %q", k, n)
		}
		a.group[i] = k
	}
	a.groups = max(a.groups, k+1)
	return nil
}

// Groups is the number of parameter groups (1 without SetGroup).
func (a *Adam) Groups() int { return a.groups }

// Update is UpdateGroups with one learning rate for every group.
func (a *Adam) Update(g *Graph, lr float64) {
	lrs := make([]float64, a.groups)
	for k := range lrs {
		lrs[k] = lr
	}
	a.UpdateGroups(g, lrs)
}

// UpdateGroups clips the gradients to a global L2 norm of maxGradNorm and
// takes one Adam step, each parameter at the learning rate of its group,
// lr = lrs[group] (0: the moments move, the parameter does not):
//
//	m = b1 m + (1-b1) g,  v = b2 v + (1-b2) g²
//	p -= lr/(1-b1^t) · m / (sqrt(v/(1-b2^t)) + eps)
//
// Everything is computed in place: a fresh allocation of a large tensor
// costs a page fault per 4 KB (tens of milliseconds for the word vectors on
// a VM).
func (a *Adam) UpdateGroups(g *Graph, lrs []float64) {
	if len(lrs) != a.groups {
		Abort(fmt.Errorf("optimizer: %d learning rates for %d parameter groups", len(lrs), a.groups))
	}
	NoGrad(func() {
		// The global norm is read back once (on a GPU each read waits for
		// the device).
		var norms []*ts.Tensor
		for i := range a.params {
			if gr := a.grad(i); gr != nil {
				norms = append(norms, g.T(gr.Norm(false)))
			}
		}
		a.lastGradNorm = 0
		scale := 1.0
		switch {
		case len(norms) == 0:
		case a.clipOnDevice && a.maxGradNorm > 0:
			// coef = min(1, max / (norm + 1e-6)), as torch.nn.utils.clip_grad_norm_.
			total := g.T(g.T(ts.Stack(norms, 0)).Norm(false))
			coef := g.T(g.T(g.T(total.AddScalar(g.Scalar(1e-6), false)).Reciprocal(false)).MulScalar(g.Scalar(a.maxGradNorm), false))
			g.Check(coef.ClampMax_(g.Scalar(1)))
			for i := range a.params {
				if gr := a.grad(i); gr != nil {
					g.Check(gr.Mul_(coef))
				}
			}
			a.lastGradNorm = math.NaN()
		default:
			a.lastGradNorm = Item(g.T(g.T(ts.Stack(norms, 0)).Norm(false)))
			if a.maxGradNorm > 0 && a.lastGradNorm > a.maxGradNorm {
				scale = a.maxGradNorm / (a.lastGradNorm + 1e-6)
			}
		}
		a.step++
		bc1 := 1 - math.Pow(a.beta1, float64(a.step))
		bc2 := 1 - math.Pow(a.beta2, float64(a.step))
		f := g.Scalar
		for i, p := range a.params {
			gr := a.grad(i)
			if gr == nil {
				continue // a parameter no loss has reached yet
			}
			if scale != 1 {
				g.Check(gr.MulScalar_(f(scale)))
			}
			m, v, d := a.m[i], a.v[i], a.scratch[i]
			g.Check(m.Lerp_(gr, f(1-a.beta1))) // m + (1-b1)(g-m)
			// v = v + (1-b2)(g² - v): g² into the scratch, then one lerp —
			// two passes over v's size instead of the three of
			// mul, addcmul, mul (gotch's addcmul has no scale).
			g.T(gr.MulOut(d, gr, false))
			g.Check(v.Lerp_(d, f(1-a.beta2)))
			lr := lrs[a.group[i]]
			if lr == 0 {
				continue
			}
			// p += m / d with d = -(bc1/lr) (sqrt(v)/sqrt(bc2) + eps)
			//                   = -(bc1/(lr sqrt(bc2))) (sqrt(v) + eps sqrt(bc2)):
			// four passes over d, the square root written straight into it.
			g.T(v.SqrtOut(d, false))
			g.Check(d.AddScalar_(f(a.eps * math.Sqrt(bc2))))
			g.Check(d.MulScalar_(f(-bc1 / (lr * math.Sqrt(bc2)))))
			g.Check(p.Addcdiv_(m, d))
		}
	})
}

// State returns the moments as named tensors for a checkpoint (owned by
// the optimizer).
func (a *Adam) State() []ts.NamedTensor {
	var out []ts.NamedTensor
	for i, name := range a.names {
		out = append(out, ts.NamedTensor{Name: "m." + name, Tensor: a.m[i]}, ts.NamedTensor{Name: "v." + name, Tensor: a.v[i]})
	}
	return out
}

// Restore copies moments saved from State and sets the step count.
func (a *Adam) Restore(saved []ts.NamedTensor, step int) error {
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
			if err := CopyInto(dst.t, src); err != nil {
				return fmt.Errorf("optimizer state %s%s: %w", dst.prefix, name, err)
			}
		}
	}
	a.step = step
	return nil
}

// copyInto copies src into dst after checking their shapes agree (gotch's
// Copy_ exits the process on a mismatch).
func CopyInto(dst, src *ts.Tensor) error {
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
	return Guard(func() { NoGrad(func() { dst.Copy_(src) }) })
}

// LearningRate is the schedule: linear warm-up over warmup steps to peak,
// then linear decay to 0 at total steps.
func LearningRate(peak float64, step, warmup, total int) float64 {
	if step < warmup {
		return peak * float64(step+1) / float64(warmup)
	}
	if total <= warmup {
		return peak
	}
	return peak * max(0, float64(total-step)/float64(total-warmup))
}

// Steps is the number of updates taken (set by Restore).
func (a *Adam) Steps() int { return a.step }
