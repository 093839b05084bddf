package tagger

import (
	"fmt"
	"math"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/kit"
)

// The losses below take logits [n, C] and per-row targets and weights held
// in Go memory, and return the weighted mean over rows as a scalar tensor:
//
//	loss = sum_i w_i l_i / sum_i w_i
//
// Rows of weight 0 (ignored tokens, removed noisy labels) may carry any
// valid target. When every weight is 0 they return nil: there is nothing to
// learn from, and the caller leaves the term out.

// crossEntropy is l_i = -log softmax(z_i)[y_i].
func crossEntropy(g *kit.Graph, logits *ts.Tensor, targets []int64, weights []float32) *ts.Tensor {
	return generalizedCrossEntropy(g, logits, targets, weights, 0)
}

// noisyCrossEntropy is l_i = -log sum_c softmax(z_i)_c exp(e_ic): the
// negative log likelihood of an observed label through the labeler's
// noise channel, e_ic = log c(obs_i | c), laid out row by row ([n*C],
// notAllowed where c(obs_i | c) = 0). One-hot evidence (0 at y_i,
// notAllowed elsewhere) is crossEntropy.
func noisyCrossEntropy(g *kit.Graph, logits *ts.Tensor, evidence, weights []float32) *ts.Tensor {
	total := sum(weights)
	if total == 0 {
		return nil
	}
	n := int64(len(weights))
	logp := g.T(logits.LogSoftmax(1, gotch.Float, false))
	ev := g.T(logp.Add(g.Floats(evidence, n, int64(len(evidence))/n), false))
	l := g.T(ev.Logsumexp([]int64{1}, false, false)) // [n] log sum_c p_ic c(obs_i | c)
	s := g.T(g.T(l.Mul(g.Floats(weights, n), false)).Sum(gotch.Float, false))
	return g.T(s.MulScalar(g.Scalar(-1/total), false))
}

// generalizedCrossEntropy is Zhang and Sabuncu's (2018) noise-robust loss
// l_i = (1 - p_i^q) / q with p_i = softmax(z_i)[y_i]. q = 0 is the limit,
// cross entropy; q = 1 is the mean absolute error. Its gradient is cross
// entropy's scaled by p_i^q, so confidently wrong (likely mislabeled) tokens
// weigh less.
func generalizedCrossEntropy(g *kit.Graph, logits *ts.Tensor, targets []int64, weights []float32, q float64) *ts.Tensor {
	total := sum(weights)
	if total == 0 {
		return nil
	}
	n := int64(len(targets))
	logp := g.T(logits.LogSoftmax(1, gotch.Float, false))
	picked := g.T(logp.Gather(1, g.Ints(targets, n, 1), false, false)) // [n, 1] log p_i
	picked = g.T(picked.View([]int64{n}, false))
	w := g.Floats(weights, n)
	if q == 0 {
		s := g.T(g.T(picked.Mul(w, false)).Sum(gotch.Float, false))
		return g.T(s.MulScalar(g.Scalar(-1/total), false))
	}
	// 1 - p^q = -expm1(q log p), exact also for small q.
	em1 := g.T(g.T(picked.MulScalar(g.Scalar(q), false)).Expm1(false))
	s := g.T(g.T(em1.Mul(w, false)).Sum(gotch.Float, false))
	return g.T(s.MulScalar(g.Scalar(-1/(q*total)), false))
}

// klDivergence is l_i = KL(s_i || softmax(z_i)) = sum_c s_ic (log s_ic -
// log p_ic), for soft targets s laid out row by row ([n*C], rows summing to
// 1).
func klDivergence(g *kit.Graph, logits *ts.Tensor, soft []float32, weights []float32) *ts.Tensor {
	total := sum(weights)
	if total == 0 {
		return nil
	}
	n := int64(len(weights))
	if len(soft)%len(weights) != 0 {
		kit.Abort(fmt.Errorf("klDivergence: %d soft target values for %d rows", len(soft), n))
	}
	classes := int64(len(soft) / len(weights))
	// The entropy part sum_i w_i sum_c s_ic log s_ic is a constant.
	ws := make([]float32, len(soft))
	entropy := 0.0
	for i, s := range soft {
		w := weights[i/int(classes)]
		ws[i] = w * s
		if s > 0 {
			entropy += float64(w) * float64(s) * math.Log(float64(s))
		}
	}
	logp := g.T(logits.LogSoftmax(1, gotch.Float, false))
	cross := g.T(g.T(logp.Mul(g.Floats(ws, n, classes), false)).Sum(gotch.Float, false))
	kl := g.T(cross.MulScalar(g.Scalar(-1/total), false))
	return g.T(kl.AddScalar(g.Scalar(entropy/total), false))
}

// klDivergenceWhere is klDivergence over the rows where keep, a [n] tensor
// of 0s and 1s computed on the device, is 1: sum_i k_i w_i l_i / sum_i k_i
// w_i, or 0 when no kept row has a weight. It serves terms whose rows are
// chosen by the model's own outputs in the same step, which Go cannot see
// without a copy from the device.
func klDivergenceWhere(g *kit.Graph, logits *ts.Tensor, soft []float32, weights []float32, keep *ts.Tensor) *ts.Tensor {
	if sum(weights) == 0 {
		return nil
	}
	n := int64(len(weights))
	classes := int64(len(soft) / len(weights))
	if len(soft) != int(n*classes) {
		kit.Abort(fmt.Errorf("klDivergenceWhere: %d soft target values for %d rows", len(soft), n))
	}
	ws := make([]float32, len(soft))
	entropy := make([]float32, n) // w_i sum_c s_ic log s_ic, per row
	for i, x := range soft {
		w := weights[i/int(classes)]
		ws[i] = w * x
		if x > 0 {
			entropy[i/int(classes)] += w * x * float32(math.Log(float64(x)))
		}
	}
	logp := g.T(logits.LogSoftmax(1, gotch.Float, false))
	cross := g.T(g.T(logp.Mul(g.Floats(ws, n, classes), false)).SumDimIntlist([]int64{1}, false, gotch.Float, false)) // [n]
	rows := g.T(g.Floats(entropy, n).Sub(cross, false))                                                               // w_i l_i
	num := g.T(rows.Dot(keep, false))
	den := g.T(g.T(g.Floats(weights, n).Dot(keep, false)).ClampMin(g.Scalar(1e-12), false))
	return g.T(num.Div(den, false))
}

// binaryLogits turns one logit per row, z ([n, 1]), into the two-class
// logits [0, z], whose softmax is [1 - sigmoid(z), sigmoid(z)]: the
// entity-vs-O head then uses the same losses as the type head.
func binaryLogits(g *kit.Graph, z *ts.Tensor) *ts.Tensor {
	return g.T(z.ConstantPadNd([]int64{1, 0}, false)) // a column of zeros on the left
}

func sum(xs []float32) float64 {
	s := 0.0
	for _, x := range xs {
		s += float64(x)
	}
	return s
}

func sqrt(n int) float64 { return math.Sqrt(float64(n)) }
