package tagger

import (
	"fmt"
	"math/rand/v2"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/kit"
)

// Steps trains and predicts a tagger batch by batch, outside a Trainer's
// epochs, schedule and evaluation: one optimizer step per batch, as a
// training takes it (the trainer's own step: forward, loss, backward,
// clipping, Adam; a fine-tuned encoder's weights in a parameter group of
// their own). It is what the speed benchmarks time against a reference
// implementation on exactly the same batches: this package's, and
// train/encoder's for fine-tuning, which cannot reach the trainer's
// internals from its package.
type Steps struct {
	m   *Tagger
	run TrainConfig
	exs []example
	tr  *Trainer
	opt *kit.Adam
	lrs []float64
	rng *rand.Rand
	out []Prediction
}

// NewSteps encodes c (with its tags) for m and readies an optimizer at
// run's learning rates; dropout is drawn from seed. Close frees the
// optimizer, not the tagger.
func NewSteps(m *Tagger, c *corpus.Corpus, run TrainConfig, seed uint64) (*Steps, error) {
	exs, err := m.encodeCorpus(c, true)
	if err != nil {
		return nil, err
	}
	tr, err := NewTrainer(m, run)
	if err != nil {
		return nil, err
	}
	// The optimizer kit.Fit gives a training (fitRun's Weights and
	// ParamGroups), at each group's peak rate.
	groups := m.paramGroups(run)
	opt, err := kit.NewGroupedAdam(m.trainedWeights(), run.MaxGradNorm, groups)
	if err != nil {
		return nil, err
	}
	lrs := []float64{run.LearningRate}
	for _, g := range groups {
		lrs = append(lrs, g.LearningRate)
	}
	return &Steps{m: m, run: run, exs: exs, tr: tr, opt: opt, lrs: lrs, rng: rand.New(rand.NewPCG(seed, 3)), out: make([]Prediction, len(exs))}, nil
}

// Close frees the optimizer's state.
func (s *Steps) Close() { s.opt.Close() }

// Batches draws batches of size sentences of similar lengths from seed, as
// an epoch of training does: sentence indices of the corpus.
func (s *Steps) Batches(size int, seed uint64) [][]int {
	return bucketBatches(s.exs, size, rand.New(rand.NewPCG(seed, 1)))
}

// Tokens counts the tokens of the batches.
func (s *Steps) Tokens(batches [][]int) int {
	n := 0
	for _, ids := range batches {
		for _, id := range ids {
			n += s.exs[id].len()
		}
	}
	return n
}

// Sentences returns the tokens of the corpus's sentences ids.
func (s *Steps) Sentences(ids []int) [][]string {
	out := make([][]string, len(ids))
	for i, id := range ids {
		out[i] = s.exs[id].tokens
	}
	return out
}

// Train takes one optimizer step per batch. Inside kit.OnComputeThread.
func (s *Steps) Train(batches [][]int) error {
	for _, ids := range batches {
		step := &kit.Step{Opt: s.opt, LR: s.lrs[0]}
		if len(s.lrs) > 1 {
			step.LRs = s.lrs
		}
		if _, _, err := s.tr.step(newBatch(s.exs, ids), nil, s.exs, nil, nil, unlabeledStep{}, step, s.rng, nil); err != nil {
			return fmt.Errorf("training step: %w", err)
		}
	}
	return nil
}

// Predict tags the batches' sentences (tags, per-token probabilities and,
// for a CRF, Viterbi paths), as prediction does. Inside
// kit.OnComputeThread.
func (s *Steps) Predict(batches [][]int) error {
	return s.m.predictBatches(s.exs, batches, s.out)
}

// ReferenceSpec describes the tagger (architecture, learning rate,
// clipping) and the batches' sentences as its inputs (word, character and
// casing ids, target tags), for a reference implementation to build and
// train the same model on the same batches (testdata/reference_tagger.py).
func (s *Steps) ReferenceSpec(batches [][]int) map[string]any {
	type sentence struct {
		Words   []int64   `json:"words"`
		Chars   [][]int64 `json:"chars"`
		Casing  []int64   `json:"casing"`
		Targets []int32   `json:"targets"`
	}
	m, c, run := s.m, s.m.Config, s.run
	var bs [][]sentence
	for _, ids := range batches {
		var sents []sentence
		for _, id := range ids {
			e := s.exs[id]
			sents = append(sents, sentence{e.words, e.chars, e.casing, e.targets})
		}
		bs = append(bs, sents)
	}
	return map[string]any{
		"config": map[string]any{
			"words": len(m.Vocab.Words), "chars": len(m.Vocab.Chars), "casings": numCasings,
			"word_dim": c.WordDim, "char_dim": c.CharDim, "char_filters": c.CharFilters, "char_kernel": c.CharKernel,
			"casing_dim": c.CasingDim, "hidden": c.Hidden, "dropout": c.Dropout, "head": c.Head,
			"tags": m.Labels.NumTags(), "lr": run.LearningRate, "clip": run.MaxGradNorm,
			"encoder_dim": c.EncoderDim, "encoder_lr": run.EncoderLearningRate,
		},
		"batches": bs,
	}
}

// Weights counts the weights the steps train, a fine-tuned encoder's
// included (its unused masked-LM head too): a reference's model must have
// as many.
func (s *Steps) Weights() int64 {
	var n int64
	for _, w := range s.m.trainedWeights() {
		n += int64(w.Tensor.Numel())
	}
	return n
}
