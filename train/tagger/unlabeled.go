package tagger

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/kit"
)

// UnlabeledObjective is a loss on sentences without tags that trains a CRF
// tagger alongside its supervised loss: semi-supervised learning, such as
// the ELBO of package crfvae, whose posterior is the tagger's CRF. The
// objective may have weights of its own (a generative model), optimized
// with the tagger's by their own Adam; they are not part of the tagger and
// not saved with it.
type UnlabeledObjective interface {
	// Start prepares the objective for training m (which the trainer's
	// run has locked to its OS thread) and returns its own weights, named
	// (none: empty). Run calls it once, before the first step.
	Start(m *Tagger) (names []string, params []*ts.Tensor, err error)
	// Loss is the objective on a batch, a scalar tensor of u.Graph, to
	// be minimized (a mean per sentence, to weigh like the CRF's loss).
	Loss(u *UnlabeledBatch) *ts.Tensor
}

// UnlabeledBatch is what an UnlabeledObjective sees of a batch of
// unlabeled sentences: the tagger's CRF scores, in the packed layout of the
// tagger (the sentences sorted by decreasing length, token t of the i-th at
// row Pos(i, t)).
type UnlabeledBatch struct {
	Graph *kit.Graph
	// Emissions are the CRF's unary scores [tokens, K]; Trans [K, K]
	// (from, to), Start and End [K] its transition weights.
	Emissions, Trans, Start, End *ts.Tensor
	// Sentences are the indices of the batch's sentences in the unlabeled
	// corpus, longest first, and Lengths their lengths.
	Sentences, Lengths []int
	// Rng draws the batch's noise (reproducible from the run's seed).
	Rng *rand.Rand
	b   *Batch
}

// Pos is the row of token t of the batch's i-th sentence.
func (u *UnlabeledBatch) Pos(i, t int) int { return u.b.pos(i, t) }

// Tokens is the number of tokens (rows) of the batch.
func (u *UnlabeledBatch) Tokens() int { return u.b.n }

// WithUnlabeled adds obj's loss on the sentences of unlabeled (their tags,
// if any, are not used) to every training step, times weight: each step
// draws as many unlabeled sentences as the labeled batch holds, a fresh
// random selection every epoch. It needs the CRF head.
func WithUnlabeled(unlabeled *corpus.Corpus, obj UnlabeledObjective, weight float64) TrainerOption {
	return func(t *Trainer) { t.unlabeled, t.objective, t.unlabeledWeight = unlabeled, obj, weight }
}

// Random stream of the unlabeled batches and their noise (+ epoch).
const streamUnlabeled = 3000

// unlabeledRun is the objective's state in a run.
type unlabeledRun struct {
	exs []example
	opt *kit.Adam // nil when the objective has no weights
}

// checkUnlabeled validates WithUnlabeled against the run's config.
func (t *Trainer) checkUnlabeled() error {
	if t.objective == nil {
		return nil
	}
	if t.model.Config.Head != CRFHead {
		return fmt.Errorf("training config: an unlabeled objective needs the %s head, not %s", CRFHead, t.model.Config.Head)
	}
	if t.unlabeledWeight <= 0 {
		return fmt.Errorf("training config: unlabeled weight %v, want > 0", t.unlabeledWeight)
	}
	if t.unlabeled == nil || len(t.unlabeled.Sentences) == 0 {
		return errors.New("training config: an unlabeled objective without unlabeled sentences")
	}
	return nil
}

// startUnlabeled encodes the unlabeled sentences and makes the objective's
// optimizer; nil without an objective.
func (t *Trainer) startUnlabeled() (*unlabeledRun, error) {
	if t.objective == nil {
		return nil, nil
	}
	exs, err := t.model.encodeCorpus(t.unlabeled, false)
	if err != nil {
		return nil, fmt.Errorf("unlabeled sentences: %w", err)
	}
	u := &unlabeledRun{exs: exs}
	names, params, err := t.objective.Start(t.model)
	if err != nil {
		return nil, fmt.Errorf("unlabeled objective: %w", err)
	}
	if len(params) > 0 {
		if u.opt, err = kit.NewAdam(names, params, t.cfg.MaxGradNorm); err != nil {
			return nil, err
		}
	}
	return u, nil
}

func (u *unlabeledRun) close() {
	if u != nil && u.opt != nil {
		u.opt.Close()
	}
}

// epochBatches are the unlabeled batches of an epoch with n steps: n
// batches of the given size, drawn afresh each epoch (cycling when the
// unlabeled sentences are fewer than the steps need).
func (u *unlabeledRun) epochBatches(n, size int, rng *rand.Rand) [][]int {
	var out [][]int
	for len(out) < n {
		bs := bucketBatches(u.exs, size, rng)
		if len(bs) == 0 {
			return nil
		}
		out = append(out, bs...)
	}
	return out[:n]
}

// unlabeledLoss is the weighted objective on the unlabeled batch ids.
func (t *Trainer) unlabeledLoss(g *kit.Graph, u *unlabeledRun, ids []int, dropout, noise *rand.Rand) *ts.Tensor {
	m := t.model
	b := newBatch(u.exs, ids)
	w := m.head.(*crfWeightsOf)
	ub := &UnlabeledBatch{
		Graph: g, Emissions: w.emissions(g, m.forward(g, b, true, dropout)),
		Trans: w.trans, Start: w.start, End: w.end, Sentences: b.ids, Rng: noise, b: b,
	}
	for _, id := range b.ids {
		ub.Lengths = append(ub.Lengths, u.exs[id].len())
	}
	l := t.objective.Loss(ub)
	return g.T(l.MulScalar(g.Scalar(t.unlabeledWeight), false))
}

// unlabeledStep is a step's share of the unlabeled objective: the ids of
// its sentences (nil: none) and the noise stream.
type unlabeledStep struct {
	run   *unlabeledRun
	ids   []int
	noise *rand.Rand
}
