package vsl

import (
	"math/rand/v2"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/kit"
	"github.com/nerflow/nerflow/train/tagger"
)

// gaussian is a diagonal Gaussian per token: mean and log-variance,
// [tokens, dim] each.
type gaussian struct{ mu, logVar *ts.Tensor }

// latents are a batch's posteriors, their samples and, for the
// hierarchical model, the conditional prior of z.
type latents struct {
	y, z     gaussian
	ySample  *ts.Tensor
	zSample  *ts.Tensor
	zPrior   *gaussian // nil: N(0, I)
	features *ts.Tensor
}

// encode runs the inference network: fixed word vectors and character
// features (and a fine-tuned encoder's states), dropout, BiGRU, dropout;
// [tokens, 2*Hidden] in packed order.
func (m *Model) encodeBatch(g *kit.Graph, b *batch, training bool, rng *rand.Rand) *ts.Tensor {
	c := m.Config
	n := int64(b.n)
	words := g.T(ts.Embedding(m.words, g.Ints(b.words, n), -1, false, false))
	chars := g.CharCNN(m.charEmb, m.convW, m.convB, b.chars)
	parts := []*ts.Tensor{words, chars}
	if m.enc != nil {
		parts = append(parts, tagger.PackedEncoderStates(g, m.enc, b.tokens, b.pos, b.n, training, m.frozenEnc, rng))
	}
	x := g.T(ts.Cat(parts, 1))
	if training {
		x = g.Dropout(x, c.Dropout, rng)
	}
	sizes := g.T(ts.OfSlice(b.batchSizes)) // on the CPU, where libtorch wants an RNN's batch sizes
	h0 := g.T(ts.Zeros([]int64{2, b.batchSizes[0], int64(c.Hidden)}, gotch.Float, m.device))
	out, hn, err := ts.GruData(x, sizes, h0, m.gru, true, 1, 0, training, true)
	g.Check(err)
	g.T(hn, nil)
	g.T(out, nil)
	if training {
		out = g.Dropout(out, c.Dropout, rng)
	}
	return out
}

// split cuts a linear layer's output [n, 2d] into a Gaussian's mean and
// log-variance.
func split(g *kit.Graph, x *ts.Tensor, d int64) gaussian {
	return gaussian{mu: g.T(x.Narrow(1, 0, d, false)), logVar: g.T(x.Narrow(1, d, d, false))}
}

// sample draws mean + exp(logVar/2) * eps with eps ~ N(0, I) from rng (the
// reparameterization trick: the sample is differentiable in the mean and
// the variance); with rng nil, the mean.
func sample(g *kit.Graph, q gaussian, rng *rand.Rand) *ts.Tensor {
	if rng == nil {
		return q.mu
	}
	shape, err := q.mu.Size()
	g.Check(err)
	eps := make([]float32, shape[0]*shape[1])
	for i := range eps {
		eps[i] = float32(rng.NormFloat64())
	}
	std := g.T(g.T(q.logVar.MulScalar(g.Scalar(0.5), false)).Exp(false))
	return g.T(q.mu.Add(g.T(std.Mul(g.Floats(eps, shape...), false)), false))
}

// infer computes the latents of a batch; with training, dropout and
// samples are drawn from rng, else samples are the means.
func (m *Model) infer(g *kit.Graph, b *batch, training bool, rng *rand.Rand) *latents {
	h := m.encodeBatch(g, b, training, rng)
	var noise *rand.Rand
	if training {
		noise = rng
	}
	l := &latents{features: h}
	l.y = split(g, m.qY.apply(g, h), int64(m.Config.YDim))
	l.ySample = sample(g, l.y, noise)
	switch m.Config.Variant {
	case Flat:
		l.z = split(g, m.qZ.apply(g, h), int64(m.Config.ZDim))
	case Hier:
		l.z = split(g, m.qZ.apply(g, g.T(ts.Cat([]*ts.Tensor{h, l.ySample}, 1))), int64(m.Config.ZDim))
		p := split(g, m.pZ.apply(g, l.ySample), int64(m.Config.ZDim))
		l.zPrior = &p
	}
	l.zSample = sample(g, l.z, noise)
	return l
}

// klDiag is the KL divergence KL(q || p) of diagonal Gaussians, summed
// over every token and dimension:
//
//	1/2 Σ [ logVar_p - logVar_q + (exp(logVar_q) + (mu_q - mu_p)²) / exp(logVar_p) - 1 ]
//
// With p nil, p is N(0, I): 1/2 Σ [ exp(logVar_q) + mu_q² - 1 - logVar_q ].
func klDiag(g *kit.Graph, q gaussian, p *gaussian) *ts.Tensor {
	varQ := g.T(q.logVar.Exp(false))
	var terms *ts.Tensor
	if p == nil {
		sq := g.T(q.mu.Square(false))
		terms = g.T(g.T(varQ.Add(sq, false)).Sub(q.logVar, false))
	} else {
		diff := g.T(g.T(q.mu.Sub(p.mu, false)).Square(false))
		ratio := g.T(g.T(varQ.Add(diff, false)).Mul(g.T(g.T(p.logVar.Neg(false)).Exp(false)), false))
		terms = g.T(g.T(ratio.Add(p.logVar, false)).Sub(q.logVar, false))
	}
	terms = g.T(terms.AddScalar(g.Scalar(-1), false))
	return g.T(g.T(terms.Sum(gotch.Float, false)).MulScalar(g.Scalar(0.5), false))
}

// terms are the summed parts of a batch's loss.
type terms struct {
	recon, kl, class *ts.Tensor // class nil without labeled tokens
}

// lossTerms computes the negative reconstruction log-likelihood, the KL
// terms and the classification cross entropy of a batch, each summed over
// its tokens.
func (m *Model) lossTerms(g *kit.Graph, b *batch, rng *rand.Rand) terms {
	l := m.infer(g, b, true, rng)
	decIn := l.zSample
	if m.Config.Variant == Flat {
		decIn = g.T(ts.Cat([]*ts.Tensor{l.ySample, l.zSample}, 1))
	}
	n := int64(b.n)
	var t terms
	t.recon = nllSum(g, m.dec.apply(g, decIn), g.Ints(b.recon, n, 1))
	t.kl = g.T(klDiag(g, l.y, nil).Add(klDiag(g, l.z, l.zPrior), false))
	if b.labeled > 0 {
		var pos, target []int64
		for p, y := range b.targets {
			if y != ignored {
				pos, target = append(pos, int64(p)), append(target, y)
			}
		}
		k := int64(len(pos))
		y := l.ySample
		if m.Config.Classify == ClassifyMean {
			y = l.y.mu
		}
		logits := m.cls.apply(g, g.T(y.IndexSelect(0, g.Ints(pos, k), false)))
		t.class = nllSum(g, logits, g.Ints(target, k, 1))
	}
	return t
}

// nllSum is the summed negative log-likelihood of targets [n, 1] under
// the softmax of logits [n, classes].
func nllSum(g *kit.Graph, logits, targets *ts.Tensor) *ts.Tensor {
	logp := g.T(logits.LogSoftmax(1, gotch.Float, false))
	picked := g.T(logp.Gather(1, targets, false, false))
	return g.T(g.T(picked.Sum(gotch.Float, false)).MulScalar(g.Scalar(-1), false))
}

// Weights of the loss's terms at one step.
type Weights struct {
	KL    float64 // the annealed KL weight (KLWeight)
	Class float64 // the classification loss's
	// Unlabeled weighs an unlabeled batch's loss in a step (see step).
	Unlabeled float64
}

// batchLoss is the batch's loss per token: (recon + KL·kl + Class·class)/n.
func (m *Model) batchLoss(g *kit.Graph, b *batch, w Weights, rng *rand.Rand) (*ts.Tensor, terms) {
	t := m.lossTerms(g, b, rng)
	loss := g.T(t.recon.Add(g.T(t.kl.MulScalar(g.Scalar(w.KL), false)), false))
	if t.class != nil {
		loss = g.T(loss.Add(g.T(t.class.MulScalar(g.Scalar(w.Class), false)), false))
	}
	return g.T(loss.MulScalar(g.Scalar(1/float64(b.n)), false)), t
}

// KLWeight is the annealed weight of the KL terms at step (0-based): it
// rises linearly from max/warmup to max over the first warmup steps, then
// stays at max (warmup 0: max from the start).
func KLWeight(max float64, step, warmup int) float64 {
	if warmup <= 0 || step >= warmup {
		return max
	}
	return max * float64(step+1) / float64(warmup)
}
