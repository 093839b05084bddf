package tagger

import (
	"math"
	"slices"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/kit"
)

// A linear-chain CRF scores a tag path y of a sentence with emissions e as
//
//	score(y) = start[y_1] + sum_t e_t[y_t] + sum_t trans[y_{t-1}, y_t] + end[y_T]
//
// and p(y) = exp(score(y)) / Z. Training minimizes -log p(gold) = log Z -
// score(gold). Where the gold tag of a token is only partly known (an
// entity of unknown type, an ignored token), the gold path becomes the set
// of paths allowed by the labels and score(gold) their log-sum-exp: the
// same forward algorithm run on emissions with disallowed tags masked out.

// notAllowed masks a tag out of a constrained forward pass. It is finite
// so that no -inf - -inf = NaN can appear; exp(-1e9) is 0 in float32.
const notAllowed = -1e9

// crfLogPartition returns sum over the sentences of b of log Z, for
// emissions [b.n, K] in b's packed layout, by the forward algorithm:
//
//	alpha_1 = start + e_1,  alpha_t[j] = logsumexp_i(alpha_{t-1}[i] + trans[i, j]) + e_t[j]
//	log Z = logsumexp_j(alpha_T[j] + end[j])
//
// In packed layout the sentences running at step t are the first
// batchSizes[t], so alpha shrinks from the end as sentences finish; the rows
// of finished sentences are set aside and scored together at the end.
//
// Every gotch operation costs a few microseconds in Go whatever its size,
// so the loop is written with as few as possible: alpha alternates between
// a column [bs, K, 1] and a row [bs, 1, K] layout, and adding the
// transitions in the matching orientation and reducing with keepdim yields
// the other layout directly, without reshaping (4 operations a step).
func crfLogPartition(g *kit.Graph, emissions, trans, start, end *ts.Tensor, b *Batch) *ts.Tensor {
	shape, err := emissions.Size()
	g.Check(err)
	n, k := shape[0], shape[1]
	type layout struct {
		em, trans, end *ts.Tensor // emissions, transitions and end scores in this layout
		tagDim         int64      // the dimension of alpha's tags
		done           []*ts.Tensor
	}
	col := &layout{ // alpha [bs, K(from), 1] + trans [1, K(from), K(to)] -> reduce dim 1 -> row
		em: g.T(emissions.View([]int64{n, k, 1}, false)), trans: g.T(trans.Unsqueeze(0, false)),
		end: g.T(end.View([]int64{1, k, 1}, false)), tagDim: 1,
	}
	row := &layout{ // alpha [bs, 1, K(from)] + trans' [1, K(to), K(from)] -> reduce dim 2 -> column
		em: g.T(emissions.View([]int64{n, 1, k}, false)), trans: g.T(g.T(trans.Transpose(0, 1, false)).Unsqueeze(0, false)),
		end: g.T(end.View([]int64{1, 1, k}, false)), tagDim: 2,
	}
	cur, other := col, row
	alpha := g.T(g.T(cur.em.Narrow(0, 0, b.batchSizes[0], false)).Add(g.T(start.View([]int64{1, k, 1}, false)), false))
	for t := 1; t < len(b.batchSizes); t++ {
		bs, prev := b.batchSizes[t], b.batchSizes[t-1]
		if bs < prev {
			cur.done = append(cur.done, g.T(alpha.Narrow(0, bs, prev-bs, false)))
			alpha = g.T(alpha.Narrow(0, 0, bs, false))
		}
		scores := g.T(alpha.Add(cur.trans, false))
		alpha = g.T(scores.Logsumexp([]int64{cur.tagDim}, true, false))
		cur, other = other, cur
		alpha = g.T(alpha.Add(g.T(cur.em.Narrow(0, int64(b.offsets[t]), bs, false)), false))
	}
	cur.done = append(cur.done, alpha)
	var total *ts.Tensor
	for _, l := range []*layout{col, row} {
		if len(l.done) == 0 {
			continue
		}
		final := g.T(g.T(ts.Cat(l.done, 0)).Add(l.end, false))
		logZ := g.T(g.T(final.Logsumexp([]int64{1, 2}, false, false)).Sum(gotch.Float, false))
		if total == nil {
			total = logZ
		} else {
			total = g.T(total.Add(logZ, false))
		}
	}
	return total
}

// crfNLL returns sum over the sentences of b of -log p(gold). gold holds
// each token's tag in packed order, or a negative value where the label
// only constrains the tag; allowed ([b.n*K], 0 or notAllowed) then says
// which tags each token's label allows.
func crfNLL(g *kit.Graph, emissions, trans, start, end *ts.Tensor, b *Batch, gold []int64, allowed func() []float32, k int) *ts.Tensor {
	if slices.Min(gold) < 0 {
		return crfMarginalNLL(g, emissions, trans, start, end, b, allowed(), k)
	}
	logZ := crfLogPartition(g, emissions, trans, start, end, b)
	return g.T(logZ.Sub(crfPathScore(g, emissions, trans, start, end, b, gold, k), false))
}

// crfMarginalNLL returns sum over the sentences of b of -log sum_y p(y)
// prod_t c_t(y_t), for evidence log c ([b.n*K], finite; notAllowed rules a
// tag out): the forward algorithm on the emissions plus the evidence.
// Partial labels are the evidence 0 or notAllowed (crfNLL); loss partial
// weighs the entity tags of an unmatched token by log(miss_rate).
func crfMarginalNLL(g *kit.Graph, emissions, trans, start, end *ts.Tensor, b *Batch, evidence []float32, k int) *ts.Tensor {
	logZ := crfLogPartition(g, emissions, trans, start, end, b)
	weighted := g.T(emissions.Add(g.Floats(evidence, int64(b.n), int64(k)), false))
	return g.T(logZ.Sub(crfLogPartition(g, weighted, trans, start, end, b), false))
}

// crfPathScore returns the sum over the sentences of b of score(path), for
// tags in packed order: a handful of gathers, where the forward algorithm
// takes a few operations per time step. (Each gotch operation carries a
// fixed cost in Go of a few microseconds, far more than the arithmetic
// of a CRF's few tags.)
func crfPathScore(g *kit.Graph, emissions, trans, start, end *ts.Tensor, b *Batch, tags []int64, k int) *ts.Tensor {
	emit := make([]int64, b.n)
	for p, y := range tags {
		emit[p] = int64(p*k) + y
	}
	var moves, firsts, lasts []int64
	for i := range b.ids {
		n := 0
		for n < len(b.batchSizes) && int(b.batchSizes[n]) > i {
			n++
		}
		firsts = append(firsts, tags[b.pos(i, 0)])
		lasts = append(lasts, tags[b.pos(i, n-1)])
		for t := 1; t < n; t++ {
			moves = append(moves, tags[b.pos(i, t-1)]*int64(k)+tags[b.pos(i, t)])
		}
	}
	sumOf := func(x *ts.Tensor, idx []int64) *ts.Tensor {
		picked := g.T(x.Take(g.Ints(idx, int64(len(idx))), false))
		return g.T(picked.Sum(gotch.Float, false))
	}
	total := g.T(sumOf(emissions, emit).Add(sumOf(start, firsts), false))
	total = g.T(total.Add(sumOf(end, lasts), false))
	if len(moves) > 0 {
		total = g.T(total.Add(sumOf(trans, moves), false))
	}
	return total
}

// crfWeights are a CRF's transition scores on the host, for decoding.
type crfWeights struct {
	k                 int
	trans, start, end []float32 // trans[i*k+j]: from tag i to tag j
}

// Viterbi returns the highest-scoring tag path of a linear-chain CRF for
// emissions em (one row of k scores per token), transitions trans
// (trans[i*k+j]: from tag i to tag j), start and end scores.
func Viterbi(em [][]float32, trans, start, end []float32) []int {
	return (&crfWeights{k: len(start), trans: trans, start: start, end: end}).viterbi(em)
}

// viterbi returns the highest-scoring tag path for emissions em (one row of
// k scores per token).
func (c *crfWeights) viterbi(em [][]float32) []int {
	n, k := len(em), c.k
	if n == 0 {
		return nil
	}
	score := make([]float64, k)
	for j := range k {
		score[j] = float64(c.start[j] + em[0][j])
	}
	back := make([][]int, n)
	next := make([]float64, k)
	for t := 1; t < n; t++ {
		back[t] = make([]int, k)
		for j := range k {
			best, arg := math.Inf(-1), 0
			for i := range k {
				if s := score[i] + float64(c.trans[i*k+j]); s > best {
					best, arg = s, i
				}
			}
			next[j] = best + float64(em[t][j])
			back[t][j] = arg
		}
		score, next = next, score
	}
	best, arg := math.Inf(-1), 0
	for j := range k {
		if s := score[j] + float64(c.end[j]); s > best {
			best, arg = s, j
		}
	}
	path := make([]int, n)
	path[n-1] = arg
	for t := n - 1; t > 0; t-- {
		path[t-1] = back[t][path[t]]
	}
	return path
}

// marginals returns p(y_t = j) for every token t and tag j, by the
// forward-backward algorithm in log space.
func (c *crfWeights) marginals(em [][]float32) [][]float32 {
	n, k := len(em), c.k
	if n == 0 {
		return nil
	}
	alpha := make([][]float64, n)
	beta := make([][]float64, n)
	for t := range n {
		alpha[t] = make([]float64, k)
		beta[t] = make([]float64, k)
	}
	terms := make([]float64, k)
	for j := range k {
		alpha[0][j] = float64(c.start[j] + em[0][j])
		beta[n-1][j] = float64(c.end[j])
	}
	for t := 1; t < n; t++ {
		for j := range k {
			for i := range k {
				terms[i] = alpha[t-1][i] + float64(c.trans[i*k+j])
			}
			alpha[t][j] = logSumExp(terms) + float64(em[t][j])
		}
	}
	for t := n - 2; t >= 0; t-- {
		for i := range k {
			for j := range k {
				terms[j] = float64(c.trans[i*k+j]) + float64(em[t+1][j]) + beta[t+1][j]
			}
			beta[t][i] = logSumExp(terms)
		}
	}
	for j := range k {
		terms[j] = alpha[n-1][j] + beta[n-1][j]
	}
	logZ := logSumExp(terms)
	out := make([][]float32, n)
	for t := range n {
		out[t] = make([]float32, k)
		for j := range k {
			out[t][j] = float32(math.Exp(alpha[t][j] + beta[t][j] - logZ))
		}
	}
	return out
}

func logSumExp(xs []float64) float64 {
	m := math.Inf(-1)
	for _, x := range xs {
		m = max(m, x)
	}
	if math.IsInf(m, -1) {
		return m
	}
	s := 0.0
	for _, x := range xs {
		s += math.Exp(x - m)
	}
	return m + math.Log(s)
}
