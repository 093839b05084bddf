package kit

import (
	"math"
	"math/rand/v2"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/nn"
	"github.com/sugarme/gotch/ts"
)

// Initializer creates parameters from a seeded Go generator, so that
// initial weights depend on the seed only (not on libtorch's global
// generator, which concurrent trainings in one worker would share). Its
// methods run inside Guard.
type Initializer struct {
	Rng    *rand.Rand
	Root   *nn.Path
	Device gotch.Device
}

// UniformData draws n values uniformly in [-bound, bound].
func (p *Initializer) UniformData(n int, bound float64) []float32 {
	data := make([]float32, n)
	for i := range data {
		data[i] = float32((2*p.Rng.Float64() - 1) * bound)
	}
	return data
}

// CharVectors draws the character vectors for CharCNN but for PadChar's,
// which is zero and stays so (CharCNN looks characters up with PadChar as
// the padding index, which gets no gradient): padding then reads as the
// convolution's own zero padding, and a token's features depend on its
// spelling alone, not on the longest word of the batch it comes in, nor on
// the chunk of a prediction's table of spellings.
func (p *Initializer) CharVectors(name string, chars, dim int) *ts.Tensor {
	data := p.UniformData(chars*dim, math.Sqrt(3/float64(dim)))
	clear(data[PadChar*dim : (PadChar+1)*dim])
	return p.Param(name, data, chars, dim)
}

// Uniform adds a parameter of the given shape drawn uniformly in [-bound,
// bound].
func (p *Initializer) Uniform(name string, bound float64, shape ...int) *ts.Tensor {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return p.Param(name, p.UniformData(n, bound), shape...)
}

// Param adds a parameter of the given shape holding data.
func (p *Initializer) Param(name string, data []float32, shape ...int) *ts.Tensor {
	dims := make([]int64, len(shape))
	for i, d := range shape {
		dims[i] = int64(d)
	}
	g := NewGraph(p.Device)
	defer g.Free()
	x := g.T(ts.OfSlice(data))
	x = g.T(x.View(dims, false))
	if p.Device != gotch.CPU {
		x = g.T(x.To(p.Device, false))
	}
	v, err := p.Root.Add(name, x, true)
	g.Check(err)
	return v
}
