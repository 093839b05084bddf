package train

import (
	"fmt"
	"unsafe"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/ts"
)

// graph owns the tensors of one computation (a forward and backward pass, a
// prediction batch) and frees them together when it is done.
//
// gotch tensors hold C memory that the Go garbage collector does not see:
// gotch v0.8.0 attaches a finalizer to every tensor (and a 100 KB Go buffer,
// so that the collector runs often enough; scripts/gotch-adapt.sh removes
// it), but a training loop that relied on finalizers would hold many steps'
// worth of activations at once. Every tensor a step creates goes through
// graph.t and is dropped by graph.free at the end of the step; the autograd graph keeps its own references to what
// backward needs, so dropping the Go handles early is safe.
//
// graph.t also turns libtorch errors into Go errors. gotch's Must* functions
// call log.Fatal on error, which would kill a worker over a shape mismatch;
// the code here calls the error-returning functions through t, which panics
// with a torchError that run recovers into an ordinary error.
type graph struct {
	device  gotch.Device
	live    []*ts.Tensor
	scalars []*ts.Scalar
	// lstmHelper, set for prediction, runs the backward direction of
	// the BiLSTM's layers beside the forward one (lstm_apart.go).
	lstmHelper *lstmHelper
}

func newGraph(device gotch.Device) *graph { return &graph{device: device} }

// torchError carries a libtorch error from graph.t to run.
type torchError struct{ err error }

// t records a tensor returned by a gotch call, or aborts the computation
// with the call's error.
func (g *graph) t(x *ts.Tensor, err error) *ts.Tensor {
	if err != nil {
		panic(torchError{err})
	}
	g.live = append(g.live, x)
	return x
}

// t3 is t for calls that return three tensors.
func (g *graph) t3(a, b, c *ts.Tensor, err error) (*ts.Tensor, *ts.Tensor, *ts.Tensor) {
	if err != nil {
		panic(torchError{err})
	}
	g.live = append(g.live, a, b, c)
	return a, b, c
}

// check aborts the computation when a gotch call that returns no tensor
// failed.
func (g *graph) check(err error) {
	if err != nil {
		panic(torchError{err})
	}
}

// scalar makes a libtorch scalar that lives as long as the graph. gotch
// frees scalars only from finalizers, which the garbage collector runs when
// it pleases; an optimizer step makes a hundred of them.
func (g *graph) scalar(v float64) *ts.Scalar {
	s := ts.FloatScalar(v)
	g.scalars = append(g.scalars, s)
	return s
}

// free drops every tensor the graph recorded.
func (g *graph) free() {
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

// run calls f and returns the libtorch error that aborted it, if any. Other
// panics are bugs and are not recovered.
func run(f func()) (err error) {
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

// floats makes a float32 tensor of the given shape on the graph's device.
func (g *graph) floats(data []float32, shape ...int64) *ts.Tensor {
	return g.upload(bytesOf(data), shape, gotch.Float)
}

// ints makes an int64 tensor of the given shape on the graph's device.
func (g *graph) ints(data []int64, shape ...int64) *ts.Tensor {
	return g.upload(bytesOf(data), shape, gotch.Int64)
}

// cpuInts makes an int64 tensor on the CPU whatever the device (libtorch
// wants an RNN's batch sizes there).
func (g *graph) cpuInts(data []int64) *ts.Tensor {
	return g.t(ts.OfDataSize(bytesOf(data), []int64{int64(len(data))}, gotch.Int64))
}

func (g *graph) upload(data []byte, shape []int64, dtype gotch.DType) *ts.Tensor {
	x := g.t(ts.OfDataSize(data, shape, dtype))
	if g.device != gotch.CPU {
		x = g.t(x.To(g.device, false))
	}
	return x
}

// bytesOf views a slice of numbers as its bytes (host order, which is what
// libtorch reads).
func bytesOf[T float32 | int64](data []T) []byte {
	if len(data) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&data[0])), len(data)*int(unsafe.Sizeof(data[0])))
}

// float32s copies a float32 tensor's values to the host (from any device,
// contiguous or not).
func float32s(x *ts.Tensor) []float32 {
	if x.DType() != gotch.Float {
		panic(torchError{fmt.Errorf("float32s: tensor is %v, not float32", x.DType())})
	}
	out := make([]float32, x.Numel())
	if err := x.CopyData(out, uint(len(out))); err != nil {
		panic(torchError{err})
	}
	return out
}

// scalar reads a one-element float32 tensor.
func scalar(x *ts.Tensor) float64 {
	v := float32s(x)
	if len(v) != 1 {
		panic(torchError{fmt.Errorf("want a scalar, got %d values", len(v))})
	}
	return float64(v[0])
}
