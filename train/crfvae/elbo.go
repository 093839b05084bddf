package crfvae

import (
	"errors"
	"fmt"
	"math"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/nn"
	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/kit"
	"github.com/nerflow/nerflow/train/tagger"
)

// Objective is the CRF-VAE's loss on unlabeled sentences (a
// tagger.UnlabeledObjective): the negative ELBO
//
//	-ELBO(x) = -E_q[log p(x | y)] - beta E_q[log p(y)] - H(q)
//
// with q(y | x) the tagger's CRF. The reconstruction term is estimated
// with one relaxed perturb-and-MAP sample (see sample); the prior and
// entropy terms are exact, from the CRF's marginals. p(y) is factored over
// tokens: prior_o on O, the rest spread evenly over the other tags.
type Objective struct {
	cfg     Config
	seed    uint64
	targets [][]int64 // generator word ids of each unlabeled sentence
	vocab   *vocabulary

	vs       *nn.VarStore
	gen      *generator
	logPrior []float32 // [K]
}

// NewObjective prepares the objective for the sentences that
// tagger.WithUnlabeled will be given; seed draws the generator's weights.
func NewObjective(cfg Config, unlabeled *corpus.Corpus, seed uint64) (*Objective, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("crfvae config: %w", err)
	}
	sents := make([][]string, len(unlabeled.Sentences))
	for i, s := range unlabeled.Sentences {
		sents[i] = s.Tokens
	}
	o := &Objective{cfg: cfg, seed: seed, vocab: newVocabulary(sents, cfg.GenVocab)}
	o.targets = make([][]int64, len(sents))
	for i, s := range sents {
		o.targets[i] = make([]int64, len(s))
		for t, tok := range s {
			o.targets[i][t] = o.vocab.id(tok)
		}
	}
	return o, nil
}

// Start creates the generator for m's tag set on m's device.
func (o *Objective) Start(m *tagger.Tagger) ([]string, []*ts.Tensor, error) {
	k := m.Labels.NumTags()
	if k < 2 {
		return nil, nil, fmt.Errorf("a tag set of %d tags", k)
	}
	o.logPrior = make([]float32, k)
	o.logPrior[0] = float32(math.Log(o.cfg.PriorO)) // class 0 is O
	for j := 1; j < k; j++ {
		o.logPrior[j] = float32(math.Log((1 - o.cfg.PriorO) / float64(k-1)))
	}
	o.Close()
	o.vs = nn.NewVarStore(m.Device())
	var genErr error
	err := kit.Guard(func() {
		o.gen, genErr = newGenerator(o.cfg, o.vs, m.Device(), k, o.vocab.size(), o.seed)
	})
	if err = errors.Join(err, genErr); err != nil {
		return nil, nil, fmt.Errorf("generator: %w", err)
	}
	return o.gen.names, o.gen.params, nil
}

// Close frees the generator's weights.
func (o *Objective) Close() {
	if o.vs != nil {
		o.vs.Destroy()
		o.vs = nil
	}
}

// Loss is the negative ELBO, mean per sentence.
func (o *Objective) Loss(u *tagger.UnlabeledBatch) *ts.Tensor {
	g := u.Graph
	em := padded(g, u.Emissions, u.Pos, u.Lengths)
	exact := newChain(g, em, u.Trans, u.Start, u.End, u.Lengths)
	q := exact.forwardBackward(1, true)
	neg := g.T(exact.entropy(q).Neg(false)) // [B]
	k := int64(len(o.logPrior))
	prior := g.T(q.unary.Matmul(g.Floats(o.logPrior, k, 1), false)) // [B, T, 1]
	prior = g.T(prior.SumDimIntlist([]int64{1, 2}, false, gotch.Float, false))
	neg = g.T(neg.Sub(g.T(prior.MulScalar(g.Scalar(o.cfg.Beta), false)), false))
	y := o.sample(g, exact, u)
	neg = g.T(neg.Sub(o.reconstruction(g, y, u), false))
	return g.T(neg.Mean(gotch.Float, false))
}

// sample is a relaxed perturb-and-MAP sample of the tags: Gumbel noise
// added to every unary potential, then the marginals of the perturbed
// chain at temperature tau (forwardBackward), [B, T, K]. As tau -> 0 it is
// the one-hot MAP path of the perturbed potentials; for tau > 0 it is
// differentiable in the potentials.
func (o *Objective) sample(g *kit.Graph, c *chain, u *tagger.UnlabeledBatch) *ts.Tensor {
	noise := make([]float32, c.b*c.t*c.k)
	for i := range noise {
		noise[i] = float32(-math.Log(-math.Log(openUnit(u.Rng.Float64()))))
	}
	perturbed := g.T(c.em.Add(g.Floats(noise, c.b, c.t, c.k), false))
	pc := newChain(g, perturbed, c.trans, c.start, c.end, c.lengths)
	return pc.forwardBackward(o.cfg.Tau, false).unary
}

// openUnit keeps a uniform draw inside (0, 1), where Gumbel's log log is
// finite.
func openUnit(x float64) float64 { return min(max(x, 1e-12), 1-1e-12) }

// reconstruction is log p(x | y) of the batch's sentences, [B].
func (o *Objective) reconstruction(g *kit.Graph, y *ts.Tensor, u *tagger.UnlabeledBatch) *ts.Tensor {
	shape, err := y.Size()
	g.Check(err)
	b, t := shape[0], shape[1]
	ids := make([]int64, b*t)
	mask := make([]float32, b*t)
	for i, s := range u.Sentences {
		for p, id := range o.targets[s] {
			ids[int64(i)*t+int64(p)], mask[int64(i)*t+int64(p)] = id, 1
		}
	}
	logp := g.T(o.gen.logits(g, y, u.Lengths).LogSoftmax(2, gotch.Float, false))
	picked := g.T(logp.Gather(2, g.Ints(ids, b, t, 1), false, false)) // [B, T, 1]
	picked = g.T(g.T(picked.View([]int64{b, t}, false)).Mul(g.Floats(mask, b, t), false))
	return g.T(picked.SumDimIntlist([]int64{1}, false, gotch.Float, false))
}
