package train

import (
	"math/rand/v2"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/nn"
	"github.com/sugarme/gotch/ts"
)

// The tagger's building blocks, exported for the other models trained on
// libtorch here (the language models of package lm): one way to own
// tensors, to step Adam, to checkpoint and to share the cores.

// Graph owns the tensors of one computation and frees them together (see
// graph): every tensor a caller makes goes through T, T3 or the makers, and
// Free drops them all exactly once.
type Graph struct{ g *graph }

// NewGraph starts a computation on device.
func NewGraph(device gotch.Device) *Graph { return &Graph{newGraph(device)} }

// T records a tensor returned by a gotch call, or aborts the computation
// (see Guard) with the call's error.
func (g *Graph) T(x *ts.Tensor, err error) *ts.Tensor { return g.g.t(x, err) }

// T3 is T for calls that return three tensors.
func (g *Graph) T3(a, b, c *ts.Tensor, err error) (*ts.Tensor, *ts.Tensor, *ts.Tensor) {
	return g.g.t3(a, b, c, err)
}

// Check aborts the computation when a gotch call without a tensor failed.
func (g *Graph) Check(err error) { g.g.check(err) }

// Scalar makes a libtorch scalar freed with the graph.
func (g *Graph) Scalar(v float64) *ts.Scalar { return g.g.scalar(v) }

// Floats makes a float32 tensor on the graph's device.
func (g *Graph) Floats(data []float32, shape ...int64) *ts.Tensor { return g.g.floats(data, shape...) }

// Ints makes an int64 tensor on the graph's device.
func (g *Graph) Ints(data []int64, shape ...int64) *ts.Tensor { return g.g.ints(data, shape...) }

// Dropout zeroes elements of x with probability p, the mask drawn from rng
// (reproducible, unlike libtorch's global generator).
func (g *Graph) Dropout(x *ts.Tensor, p float64, rng *rand.Rand) *ts.Tensor {
	return g.g.dropout(x, p, rng)
}

// Free drops every tensor the graph recorded.
func (g *Graph) Free() { g.g.free() }

// Guard runs f and returns the libtorch error that aborted it, if any.
func Guard(f func()) error { return run(f) }

// NoGrad runs f with gradient tracking off, holding the OS thread (see noGrad).
func NoGrad(f func()) { noGrad(f) }

// Float32s copies a float32 tensor's values to the host; inside Guard.
func Float32s(x *ts.Tensor) []float32 { return float32s(x) }

// UniformParam adds a parameter of the given shape to root, drawn
// uniformly in [-bound, bound] from rng; inside Guard.
func UniformParam(root *nn.Path, device gotch.Device, rng *rand.Rand, name string, bound float64, shape ...int) *ts.Tensor {
	p := &initializer{rng: rng, root: root, device: device}
	return p.uniform(name, bound, shape...)
}

// CharVectorsParam adds the character vectors for CharCNN to root: chars
// rows of dim, drawn from rng as the tagger's are, padding's row zero.
func CharVectorsParam(root *nn.Path, device gotch.Device, rng *rand.Rand, name string, chars, dim int) *ts.Tensor {
	p := &initializer{rng: rng, root: root, device: device}
	return p.charVectors(name, chars, dim)
}

// CharRows is the layout of a batch's tokens for CharCNN: one row per
// distinct spelling, gathered back per token.
type CharRows struct{ r charRows }

// NewCharRows lays out the character ids of tokens (Vocab.CharIDs).
func NewCharRows(tokens [][]int64) CharRows { return CharRows{newCharRows(tokens)} }

// CharCNN is the tagger's character CNN over tokens laid out by
// NewCharRows: character vectors emb [chars, Ec], a same-padded
// convolution convW [F, Ec, odd kernel] with bias convB [F], and a max over
// each word's characters; returns [tokens, F]. Inside Guard.
func CharCNN(g *Graph, emb, convW, convB *ts.Tensor, rows CharRows) *ts.Tensor {
	return g.g.charCNN(emb, convW, convB, rows.r)
}

// Adam is the tagger's optimizer (moments in tensors, so checkpoints hold
// them; global-norm clipping) over any named parameters.
type Adam struct{ a *adam }

// NewAdam optimizes params, named for checkpoints.
func NewAdam(names []string, params []*ts.Tensor, maxGradNorm float64) (*Adam, error) {
	a, err := newAdamFor(names, params, maxGradNorm)
	if err != nil {
		return nil, err
	}
	return &Adam{a}, nil
}

// ZeroGrad clears the gradients; inside Guard.
func (a *Adam) ZeroGrad(g *Graph) { a.a.zeroGrad(g.g) }

// Update clips the gradients and takes one step at learning rate lr;
// inside Guard.
func (a *Adam) Update(g *Graph, lr float64) { a.a.update(g.g, lr) }

// Steps is the number of updates taken (restored by Restore).
func (a *Adam) Steps() int { return a.a.step }

// State returns the moments as named tensors (owned by the optimizer).
func (a *Adam) State() []ts.NamedTensor { return a.a.state() }

// Restore copies moments saved from State and sets the step count.
func (a *Adam) Restore(saved []ts.NamedTensor, step int) error { return a.a.restore(saved, step) }

// Close frees the moments.
func (a *Adam) Close() { a.a.close() }

// LearningRate is the tagger's schedule: linear warm-up, then linear decay.
func LearningRate(peak float64, step, warmup, total int) float64 {
	return learningRate(peak, step, warmup, total)
}

// SaveTensors writes named tensors in libtorch's format, atomically.
func SaveTensors(named []ts.NamedTensor, path string) error { return saveTensors(named, path) }

// LoadTensors reads tensors saved by SaveTensors onto device; the caller
// drops them (DropTensors).
func LoadTensors(path string, device gotch.Device) ([]ts.NamedTensor, error) {
	return loadTensors(path, device)
}

// DropTensors frees loaded tensors.
func DropTensors(named []ts.NamedTensor) { dropAll(named) }

// NamedParams returns the weights of vs by name, sorted (the order of an
// optimizer's state and of checkpoints).
func NamedParams(vs *nn.VarStore) []ts.NamedTensor { return namedParams(vs) }

// SplitNamed returns the names and the tensors of named tensors, in order
// (what NewAdam takes).
func SplitNamed(named []ts.NamedTensor) ([]string, []*ts.Tensor) {
	names, tensors := make([]string, len(named)), make([]*ts.Tensor, len(named))
	for i, nt := range named {
		names[i], tensors[i] = nt.Name, nt.Tensor
	}
	return names, tensors
}

// LoadWeights copies the tensors saved in path (SaveTensors) onto device
// into the weights of the same names, which must be exactly the saved ones,
// of the same shapes.
func LoadWeights(path string, device gotch.Device, weights []ts.NamedTensor) error {
	return loadWeights(path, device, weights)
}

// CopyInto copies src into dst after checking that their shapes agree.
func CopyInto(dst, src *ts.Tensor) error { return copyInto(dst, src) }

// OnComputeThread runs a training or prediction on an OS thread of its own
// with its share of the cores, ends the thread after (so that its OpenMP
// team goes with it), and raises a panic of f again in the caller; f calls
// refresh now and then to follow the neighbours.
func OnComputeThread(f func(refresh func())) { onComputeThread(f) }
