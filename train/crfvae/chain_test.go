package crfvae

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/kit"
	"github.com/nerflow/nerflow/train/internal/traintest"
	"github.com/nerflow/nerflow/train/tagger"
)

// tinyChain is a batch of two sentences (3 and 2 tokens) over 3 tags,
// with potentials drawn from seed, in Go memory.
type tinyChain struct {
	k                 int
	lengths           []int
	em                [][][]float32 // [sentence][token][tag]
	trans, start, end []float32
}

func newTinyChain(seed uint64, spread float64) *tinyChain {
	rng := rand.New(rand.NewPCG(seed, 1))
	draw := func(n int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = float32((2*rng.Float64() - 1) * spread)
		}
		return out
	}
	c := &tinyChain{k: 3, lengths: []int{3, 2}, trans: draw(9), start: draw(3), end: draw(3)}
	for _, n := range c.lengths {
		var rows [][]float32
		for range n {
			rows = append(rows, draw(3))
		}
		c.em = append(c.em, rows)
	}
	return c
}

func (c *tinyChain) score(i int, p []int) float64 {
	s := float64(c.start[p[0]] + c.end[p[len(p)-1]])
	for t, y := range p {
		s += float64(c.em[i][t][y])
		if t > 0 {
			s += float64(c.trans[p[t-1]*c.k+y])
		}
	}
	return s
}

// enumerate returns, by brute force over every path of sentence i, log
// sum_y exp(score(y)/tau), the marginals of exp(score(y)/tau)/Z and the
// entropy of that distribution.
func (c *tinyChain) enumerate(i int, tau float64) (logZ float64, marg [][]float64, entropy float64) {
	ps := traintest.Paths(c.lengths[i], c.k)
	scores := make([]float64, len(ps))
	m := math.Inf(-1)
	for j, p := range ps {
		scores[j] = c.score(i, p) / tau
		m = max(m, scores[j])
	}
	z := 0.0
	for _, s := range scores {
		z += math.Exp(s - m)
	}
	logZ = m + math.Log(z)
	marg = make([][]float64, c.lengths[i])
	for t := range marg {
		marg[t] = make([]float64, c.k)
	}
	for j, p := range ps {
		pr := math.Exp(scores[j] - logZ)
		entropy -= pr * (scores[j] - logZ)
		for t, y := range p {
			marg[t][y] += pr
		}
	}
	return logZ, marg, entropy
}

// run builds the chain on the CPU and runs forwardBackward.
func (c *tinyChain) run(t *testing.T, tau float64) (logZ []float32, unary []float32, entropy []float32) {
	t.Helper()
	g := kit.NewGraph(gotch.CPU)
	defer g.Free()
	err := kit.Guard(func() {
		em := make([]float32, 2*3*3)
		for i, rows := range c.em {
			for s, row := range rows {
				copy(em[(i*3+s)*3:], row)
			}
		}
		ch := newChain(g, g.Floats(em, 2, 3, 3), g.Floats(c.trans, 3, 3), g.Floats(c.start, 3), g.Floats(c.end, 3), c.lengths)
		m := ch.forwardBackward(tau, true)
		logZ, unary = kit.Float32s(m.logZ), kit.Float32s(m.unary)
		entropy = kit.Float32s(ch.entropy(m))
	})
	if err != nil {
		t.Fatal(err)
	}
	return logZ, unary, entropy
}

func TestForwardBackwardMatchesEnumeration(t *testing.T) {
	for _, tau := range []float64{1, 0.5, 2} {
		c := newTinyChain(3, 1.5)
		logZ, unary, entropy := c.run(t, tau)
		for i := range c.lengths {
			wantZ, wantMarg, wantH := c.enumerate(i, tau)
			if math.Abs(float64(logZ[i])-wantZ) > 1e-4 {
				t.Errorf("tau %v, sentence %d: log Z %v, enumeration %v", tau, i, logZ[i], wantZ)
			}
			if math.Abs(float64(entropy[i])-wantH) > 1e-4 {
				t.Errorf("tau %v, sentence %d: entropy %v, enumeration %v", tau, i, entropy[i], wantH)
			}
			for s := range 3 {
				for j := range 3 {
					got := float64(unary[(i*3+s)*3+j])
					want := 0.0 // past the sentence's end
					if s < c.lengths[i] {
						want = wantMarg[s][j]
					}
					if math.Abs(got-want) > 1e-5 {
						t.Errorf("tau %v, sentence %d, token %d, tag %d: marginal %v, enumeration %v", tau, i, s, j, got, want)
					}
				}
			}
		}
	}
}

// As tau -> 0 the relaxed marginals become the one-hot Viterbi path.
func TestLowTemperatureGivesViterbi(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		c := newTinyChain(seed, 2)
		_, unary, _ := c.run(t, 0.01)
		for i := range c.lengths {
			path := tagger.Viterbi(c.em[i], c.trans, c.start, c.end)
			// The margin of the best path over the second best decides
			// how close to one-hot tau = 0.01 gets; skip near-ties.
			ps := traintest.Paths(c.lengths[i], c.k)
			best, second := math.Inf(-1), math.Inf(-1)
			for _, p := range ps {
				s := c.score(i, p)
				if s > best {
					best, second = s, best
				} else if s > second {
					second = s
				}
			}
			if best-second < 0.1 {
				continue
			}
			for s, y := range path {
				for j := range 3 {
					want := 0.0
					if j == y {
						want = 1
					}
					if got := float64(unary[(i*3+s)*3+j]); math.Abs(got-want) > 1e-3 {
						t.Errorf("seed %d, sentence %d, token %d, tag %d: %v at tau 0.01, Viterbi path %v", seed, i, s, j, got, path)
					}
				}
			}
		}
	}
}

// Gradients flow through the relaxed marginals to the potentials: the
// derivative of a marginal matches a finite difference.
func TestRelaxedMarginalsAreDifferentiable(t *testing.T) {
	c := newTinyChain(9, 1)
	const tau, h = 0.5, 1e-2
	g := kit.NewGraph(gotch.CPU)
	defer g.Free()
	var grad []float32
	err := kit.Guard(func() {
		em := make([]float32, 2*3*3)
		for i, rows := range c.em {
			for s, row := range rows {
				copy(em[(i*3+s)*3:], row)
			}
		}
		x := g.T(g.Floats(em, 2, 3, 3).SetRequiresGrad(true, false))
		ch := newChain(g, x, g.Floats(c.trans, 3, 3), g.Floats(c.start, 3), g.Floats(c.end, 3), c.lengths)
		m := ch.forwardBackward(tau, false)
		// d mu[0, 1, 2] / d em.
		target := g.T(g.T(g.T(m.unary.Select(0, 0, false)).Select(0, 1, false)).Select(0, 2, false))
		g.Check(target.Backward())
		grad = kit.Float32s(g.T(x.Grad(false)))
	})
	if err != nil {
		t.Fatal(err)
	}
	marg := func(cc *tinyChain) float64 {
		_, m, _ := cc.enumerate(0, tau)
		return m[1][2]
	}
	for s := range 3 {
		for j := range 3 {
			plus, minus := *c, *c
			plus.em, minus.em = shifted(c.em, s, j, h), shifted(c.em, s, j, -h)
			want := (marg(&plus) - marg(&minus)) / (2 * h)
			if got := float64(grad[s*3+j]); math.Abs(got-want) > 2e-3 {
				t.Errorf("d mu / d em[0][%d][%d] = %v, finite difference %v", s, j, got, want)
			}
		}
	}
	for _, v := range grad[9:] {
		if v != 0 {
			t.Errorf("sentence 1's potentials got gradient %v from sentence 0's marginal", grad[9:])
			break
		}
	}
}

func shifted(em [][][]float32, s, j int, h float64) [][][]float32 {
	out := make([][][]float32, len(em))
	for i, rows := range em {
		for _, row := range rows {
			out[i] = append(out[i], append([]float32(nil), row...))
		}
	}
	out[0][s][j] += float32(h)
	return out
}
