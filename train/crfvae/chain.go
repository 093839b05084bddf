package crfvae

import (
	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/kit"
)

// chain is a batch of linear-chain CRF potentials in padded layout:
// unary scores em [B, T, K] (rows past a sentence's end are ignored),
// transitions trans [K, K] (from, to), start and end [K].
type chain struct {
	g                     *kit.Graph
	em, trans, start, end *ts.Tensor
	lengths               []int
	b, t, k               int64
	// valid[t] is [B, 1]: 1 where step t lies inside the sentence, else 0.
	valid []*ts.Tensor
}

func newChain(g *kit.Graph, em, trans, start, end *ts.Tensor, lengths []int) *chain {
	shape, err := em.Size()
	g.Check(err)
	c := &chain{g: g, em: em, trans: trans, start: start, end: end, lengths: lengths, b: shape[0], t: shape[1], k: shape[2]}
	for t := range int(c.t) {
		v := make([]float32, c.b)
		for i, n := range lengths {
			if t < n {
				v[i] = 1
			}
		}
		c.valid = append(c.valid, g.Floats(v, c.b, 1))
	}
	return c
}

// padded lays out the rows of packed [n, K] (row u.Pos(i, t) for token t
// of sentence i) as [B, T, K], zeros past each sentence's end.
func padded(g *kit.Graph, packed *ts.Tensor, pos func(i, t int) int, lengths []int) *ts.Tensor {
	shape, err := packed.Size()
	g.Check(err)
	n, k := shape[0], shape[1]
	b, t := int64(len(lengths)), int64(lengths[0])
	for _, l := range lengths {
		t = max(t, int64(l))
	}
	idx := make([]int64, b*t)
	for i := range int(b) {
		for s := range int(t) {
			idx[int64(i)*t+int64(s)] = n // the zero row
			if s < lengths[i] {
				idx[int64(i)*t+int64(s)] = int64(pos(i, s))
			}
		}
	}
	zero := g.T(ts.Zeros([]int64{1, k}, gotch.Float, deviceOf(g, packed)))
	rows := g.T(ts.Cat([]*ts.Tensor{packed, zero}, 0))
	out := g.T(rows.IndexSelect(0, g.Ints(idx, b*t), false))
	return g.T(out.View([]int64{b, t, k}, false))
}

func deviceOf(g *kit.Graph, x *ts.Tensor) gotch.Device {
	d, err := x.Device()
	g.Check(err)
	return d
}

// marginals are the result of the forward-backward algorithm on a chain.
type marginals struct {
	logZ  *ts.Tensor // [B]
	unary *ts.Tensor // [B, T, K]: p(y_t = j), 0 past the end
	// expected is E[score(y)] under the chain's distribution, [B]:
	// with logZ, the entropy (only computed when asked for).
	expected *ts.Tensor
}

// forwardBackward runs the forward and backward algorithms in log space on
// the potentials divided by tau:
//
//	alpha_1 = (start + e_1)/tau,  alpha_t[j] = logsumexp_i(alpha_{t-1}[i] + trans[i,j]/tau) + e_t[j]/tau
//	beta_T = end/tau,             beta_t[i] = logsumexp_j(trans[i,j]/tau + e_{t+1}[j]/tau + beta_{t+1}[j])
//	log Z_tau = logsumexp_j(alpha_T[j] + end[j]/tau),  mu_t[j] = exp(alpha_t[j] + beta_t[j] - log Z_tau)
//
// mu are the marginals of the distribution proportional to
// exp(score(y)/tau): at tau = 1 those of the CRF, and as tau -> 0 the
// one-hot Viterbi path, every max of Viterbi replaced by a softmax of
// temperature tau. Every operation is differentiable, so gradients flow
// from mu to the potentials. With expected, it also returns the expected
// score E[score(y)] under the same distribution, through the pairwise
// marginals xi_t[i,j] = exp(alpha_{t-1}[i] + trans[i,j]/tau + e_t[j]/tau +
// beta_t[j] - log Z_tau).
//
// A sentence that ended carries its alpha forward unchanged, and its beta
// stays end/tau until its last token, so one pass serves every length.
func (c *chain) forwardBackward(tau float64, expected bool) *marginals {
	g := c.g
	inv := g.Scalar(1 / tau)
	scale := func(x *ts.Tensor) *ts.Tensor { return g.T(x.MulScalar(inv, false)) }
	em, trans, start, end := scale(c.em), scale(c.trans), scale(c.start), scale(c.end)
	step := func(t int) *ts.Tensor { return g.T(em.Select(1, int64(t), false)) } // [B, K]
	mix := func(v, a, b *ts.Tensor) *ts.Tensor {                                 // v*a + (1-v)*b = b + v*(a-b)
		return g.T(b.Add(g.T(g.T(a.Sub(b, false)).Mul(v, false)), false))
	}
	transFrom := g.T(trans.Unsqueeze(0, false)) // [1, K(from), K(to)]

	alpha := make([]*ts.Tensor, c.t)
	alpha[0] = g.T(step(0).Add(start, false))
	for t := 1; t < int(c.t); t++ {
		s := g.T(g.T(alpha[t-1].Unsqueeze(2, false)).Add(transFrom, false))
		next := g.T(g.T(s.Logsumexp([]int64{1}, false, false)).Add(step(t), false))
		alpha[t] = mix(c.valid[t], next, alpha[t-1])
	}
	endRow := g.T(g.T(end.Unsqueeze(0, false)).Expand([]int64{c.b, c.k}, false, false))
	beta := make([]*ts.Tensor, c.t)
	beta[c.t-1] = endRow
	for t := int(c.t) - 2; t >= 0; t-- {
		ahead := g.T(g.T(step(t+1).Add(beta[t+1], false)).Unsqueeze(1, false)) // [B, 1, K(to)]
		s := g.T(ahead.Add(transFrom, false))
		beta[t] = mix(c.valid[t+1], g.T(s.Logsumexp([]int64{2}, false, false)), endRow)
	}
	last := g.T(alpha[c.t-1].Add(end, false))
	logZ := g.T(last.Logsumexp([]int64{1}, false, false)) // [B]
	logZcol := g.T(logZ.Unsqueeze(1, false))

	unary := make([]*ts.Tensor, c.t)
	for t := range int(c.t) {
		lm := g.T(g.T(alpha[t].Add(beta[t], false)).Sub(logZcol, false))
		unary[t] = g.T(g.T(lm.Exp(false)).Mul(c.valid[t], false))
	}
	out := &marginals{logZ: logZ, unary: g.T(ts.Stack(unary, 1))}
	if !expected {
		return out
	}
	// E[score] = sum_t mu_t . e_t + sum_t xi_t . trans + mu_1 . start +
	// mu_T . end, in the scaled potentials.
	sumAll := func(x *ts.Tensor, dims ...int64) *ts.Tensor {
		return g.T(x.SumDimIntlist(dims, false, gotch.Float, false))
	}
	exp := sumAll(g.T(out.unary.Mul(em, false)), 1, 2)
	exp = g.T(exp.Add(sumAll(g.T(unary[0].Mul(start, false)), 1), false))
	final := g.T(last.Softmax(1, gotch.Float, false)) // mu at each sentence's last token
	exp = g.T(exp.Add(sumAll(g.T(final.Mul(end, false)), 1), false))
	logZcube := g.T(logZcol.Unsqueeze(2, false))
	for t := 1; t < int(c.t); t++ {
		from := g.T(alpha[t-1].Unsqueeze(2, false))                                          // [B, K, 1]
		to := g.T(g.T(step(t).Add(beta[t], false)).Unsqueeze(1, false))                      // [B, 1, K]
		lxi := g.T(g.T(g.T(from.Add(transFrom, false)).Add(to, false)).Sub(logZcube, false)) // [B, K, K]
		xi := g.T(g.T(lxi.Exp(false)).Mul(g.T(c.valid[t].Unsqueeze(2, false)), false))
		exp = g.T(exp.Add(sumAll(g.T(xi.Mul(transFrom, false)), 1, 2), false))
	}
	out.expected = exp
	return out
}

// entropy is H(q) = log Z - E_q[score(y)] of the chain's distribution at
// tau = 1, per sentence [B].
func (c *chain) entropy(m *marginals) *ts.Tensor {
	return c.g.T(m.logZ.Sub(m.expected, false))
}
