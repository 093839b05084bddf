package kit

import (
	"fmt"
	"math"
	"math/rand/v2"
	"unsafe"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/ts"
)

// Graph owns the tensors of one computation (a forward and backward pass, a
// prediction batch) and frees them together when it is done.
//
// gotch tensors hold C memory that the Go garbage collector does not see:
// gotch v0.8.0 attaches a finalizer to every tensor (and a 100 KB Go buffer,
// so that the collector runs often enough; scripts/gotch-adapt.sh removes
// it), but a training loop that relied on finalizers would hold many steps'
// worth of activations at once. Every tensor a step creates goes through
// Graph.T and is dropped by Graph.Free at the end of the step; the autograd
// graph keeps its own references to what backward needs, so dropping the Go
// handles early is safe.
//
// T also turns libtorch errors into Go errors. gotch's Must* functions call
// log.Fatal on error, which would kill a worker over a shape mismatch; the
// code here calls the error-returning functions through T, which aborts
// the computation (Abort) with an error that Guard recovers.
type Graph struct {
	device  gotch.Device
	live    []*ts.Tensor
	scalars []*ts.Scalar
	// LSTMHelper, set for a prediction, runs one direction of a
	// bidirectional LSTM layer beside the other (see LSTMHelper).
	LSTMHelper *LSTMHelper
	// deviceMasks draws dropout masks with libtorch (always on a GPU; the
	// tests set it to check that path on the CPU).
	deviceMasks bool
}

// NewGraph starts a computation on device.
func NewGraph(device gotch.Device) *Graph { return &Graph{device: device} }

// Device is the device the graph's makers put tensors on.
func (g *Graph) Device() gotch.Device { return g.device }

// torchError carries a libtorch error from Abort to Guard.
type torchError struct{ err error }

// Abort ends the computation that Guard runs with err.
func Abort(err error) { panic(torchError{err}) }

// T records a tensor returned by a gotch call, or aborts the computation
// with the call's error.
func (g *Graph) T(x *ts.Tensor, err error) *ts.Tensor {
	if err != nil {
		Abort(err)
	}
	g.live = append(g.live, x)
	return x
}

// T3 is T for calls that return three tensors.
func (g *Graph) T3(a, b, c *ts.Tensor, err error) (*ts.Tensor, *ts.Tensor, *ts.Tensor) {
	if err != nil {
		Abort(err)
	}
	g.live = append(g.live, a, b, c)
	return a, b, c
}

// Keep records tensors made outside T (nil ones are skipped), to be freed
// with the graph.
func (g *Graph) Keep(xs ...*ts.Tensor) {
	for _, x := range xs {
		if x != nil {
			g.live = append(g.live, x)
		}
	}
}

// Check aborts the computation when a gotch call that returns no tensor
// failed.
func (g *Graph) Check(err error) {
	if err != nil {
		Abort(err)
	}
}

// Scalar makes a libtorch scalar that lives as long as the graph. gotch
// frees scalars only from finalizers, which the garbage collector runs when
// it pleases; an optimizer step makes a hundred of them.
func (g *Graph) Scalar(v float64) *ts.Scalar {
	s := ts.FloatScalar(v)
	g.scalars = append(g.scalars, s)
	return s
}

// Free drops every tensor the graph recorded; the graph can be used again.
func (g *Graph) Free() {
	for _, x := range g.live {
		_ = x.Drop()
	}
	for _, s := range g.scalars {
		_ = s.Drop()
	}
	clear(g.live)
	clear(g.scalars)
	g.live, g.scalars = g.live[:0], g.scalars[:0]
}

// Guard calls f and returns the libtorch error that aborted it, if any.
// Other panics are bugs and are not recovered.
func Guard(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			te, ok := r.(torchError)
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("libtorch: %w", te.err)
		}
	}()
	f()
	return nil
}

// Floats makes a float32 tensor of the given shape on the graph's device.
func (g *Graph) Floats(data []float32, shape ...int64) *ts.Tensor {
	return g.Upload(BytesOf(data), shape, gotch.Float)
}

// Ints makes an int64 tensor of the given shape on the graph's device.
func (g *Graph) Ints(data []int64, shape ...int64) *ts.Tensor {
	return g.Upload(BytesOf(data), shape, gotch.Int64)
}

// CPUInts makes an int64 tensor on the CPU whatever the device (libtorch
// wants an RNN's batch sizes there).
func (g *Graph) CPUInts(data []int64) *ts.Tensor {
	return g.T(ts.OfDataSize(BytesOf(data), []int64{int64(len(data))}, gotch.Int64))
}

// Upload makes a tensor of dtype and shape from raw host-order bytes on
// the graph's device.
func (g *Graph) Upload(data []byte, shape []int64, dtype gotch.DType) *ts.Tensor {
	x := g.T(ts.OfDataSize(data, shape, dtype))
	if g.device != gotch.CPU {
		x = g.T(x.To(g.device, false))
	}
	return x
}

// Dropout zeroes each element of x with probability p and scales the rest
// by 1/(1-p), with a mask drawn from rng (reproducible, unlike libtorch's
// global generator). Each 64-bit draw decides four elements (16 bits each:
// p is rounded to a multiple of 1/65536), a quarter of the draws of one
// per element; the mask is a sizable part of a CPU step.
//
// On a GPU the mask is drawn there instead, by libtorch's dropout, and rng
// is not used: a host-drawn mask costs a loop over the activation's size
// and a synchronous copy to the device at every call, several per layer
// and step, while the device waits (on an H100 the encoder's pretraining
// steps ran at 0.12-0.5 of PyTorch's speed with host masks). The masks
// then come from libtorch's generator and a GPU run is not reproducible
// bit for bit, which it was not anyway (cuDNN's kernels and atomic adds
// sum in varying order).
func (g *Graph) Dropout(x *ts.Tensor, p float64, rng *rand.Rand) *ts.Tensor {
	if p == 0 {
		return x
	}
	if g.device.IsCuda() || g.deviceMasks {
		return g.T(ts.Dropout(x, p, true))
	}
	shape, err := x.Size()
	g.Check(err)
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	mask := make([]float32, n)
	keep := float32(1 / (1 - p))
	threshold := uint64(math.Round(p * (1 << 16)))
	for i := 0; i < len(mask); i += 4 {
		r := rng.Uint64()
		for j := i; j < min(i+4, len(mask)); j++ {
			if r&0xffff >= threshold {
				mask[j] = keep
			}
			r >>= 16
		}
	}
	return g.T(x.Mul(g.Floats(mask, shape...), false))
}

// BytesOf views a slice of numbers as its bytes (host order, which is what
// libtorch reads).
func BytesOf[T float32 | int64](data []T) []byte {
	if len(data) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&data[0])), len(data)*int(unsafe.Sizeof(data[0])))
}

// Float32s copies a float32 tensor's values to the host (from any device,
// contiguous or not); inside Guard.
func Float32s(x *ts.Tensor) []float32 {
	if x.DType() != gotch.Float {
		Abort(fmt.Errorf("float32s: tensor is %v, not float32", x.DType()))
	}
	out := make([]float32, x.Numel())
	if err := x.CopyData(out, uint(len(out))); err != nil {
		Abort(err)
	}
	return out
}

// HostCopies copies the values of named float32 tensors to the host, keyed
// by name: a snapshot that later steps on the device do not change, to set
// weights before and after a step, or of two runs, side by side.
func HostCopies(named []ts.NamedTensor) (map[string][]float32, error) {
	out := make(map[string][]float32, len(named))
	err := Guard(func() {
		for _, nt := range named {
			out[nt.Name] = Float32s(nt.Tensor)
		}
	})
	return out, err
}

// Item reads a one-element float32 tensor; inside Guard.
func Item(x *ts.Tensor) float64 {
	v := Float32s(x)
	if len(v) != 1 {
		Abort(fmt.Errorf("want a scalar, got %d values", len(v)))
	}
	return float64(v[0])
}

// TopK returns, for each row of x ([rows, n] float32), the k largest of
// its values in the columns from skip on, best first, and their columns
// (counted from 0), row after row ([rows*k] each): what a sampler of the k
// most likely words needs, without the whole rows on the host. Inside
// Guard.
func (g *Graph) TopK(x *ts.Tensor, skip, k int) (cols []int64, vals []float32) {
	shape, err := x.Size()
	g.Check(err)
	n := shape[1] - int64(skip)
	if k < 1 || int64(k) > n {
		Abort(fmt.Errorf("top %d of %d columns", k, n))
	}
	v, i, err := g.T(x.Narrow(1, int64(skip), n, false)).Topk(int64(k), 1, true, true, false)
	g.T(v, err)
	g.T(i, nil)
	cols = make([]int64, i.Numel())
	if len(cols) > 0 {
		g.Check(i.CopyData(cols, uint(len(cols))))
	}
	for j := range cols {
		cols[j] += int64(skip)
	}
	return cols, Float32s(v)
}
