package lm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"path/filepath"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/kit"
)

// TrainConfig are the hyperparameters of a training run.
type TrainConfig struct {
	Epochs       int     `json:"epochs"`
	BatchSize    int     `json:"batch_size"` // sentences
	LearningRate float64 `json:"learning_rate"`
	Warmup       float64 `json:"warmup"` // fraction of the steps
	MaxGradNorm  float64 `json:"max_grad_norm"`
	// MaxLen cuts longer sentences (their tail is lost for training only).
	MaxLen int    `json:"max_len"`
	Seed   uint64 `json:"seed"`
}

// DefaultTrainConfig trains for 2 epochs with Adam.
func DefaultTrainConfig() TrainConfig {
	return TrainConfig{Epochs: 2, BatchSize: 32, LearningRate: 2e-3, Warmup: 0.02, MaxGradNorm: 5, MaxLen: 80, Seed: 1}
}

func (c TrainConfig) validate() error {
	if c.Epochs < 1 || c.BatchSize < 1 || c.LearningRate <= 0 || c.MaxLen < 1 {
		return fmt.Errorf("epochs %d, batch size %d, learning rate %v, max len %d: all must be positive", c.Epochs, c.BatchSize, c.LearningRate, c.MaxLen)
	}
	if c.Warmup < 0 || c.Warmup > 1 || c.MaxGradNorm < 0 {
		return fmt.Errorf("warmup %v, max grad norm %v out of range", c.Warmup, c.MaxGradNorm)
	}
	return nil
}

// Perplexity of both directions on some text.
type Perplexity struct {
	Forward  float64 `json:"forward"`
	Backward float64 `json:"backward"`
	Tokens   int     `json:"tokens"` // targets scored per direction (words and sentence ends)
}

// EpochReport is what one epoch achieved.
type EpochReport struct {
	Epoch        int         `json:"epoch"`
	TrainLoss    float64     `json:"train_loss"` // mean NLL per target, both directions
	Heldout      *Perplexity `json:"heldout,omitempty"`
	TokensPerSec float64     `json:"tokens_per_sec"`
	Seconds      float64     `json:"seconds"`
}

// Progress is a live report of a run, after every batch.
type Progress = kit.Progress

// Options of Train: where it logs, reports and checkpoints (Resume: the
// directory of a checkpoint to continue from).
type Options = kit.FitOptions

// Train fits the models to sentences (tokens), reporting held-out
// perplexity after every epoch when heldout is not empty, on kit.Fit. It
// computes on an OS thread of its own (kit.OnComputeThread) and waits for
// it.
func Train(ctx context.Context, m *Model, sentences, heldout [][]string, cfg TrainConfig, o Options) ([]EpochReport, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("language model training: %w", err)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	r := &fitRun{m: m, cfg: cfg, heldout: heldout, log: o.Log}
	for _, s := range sentences {
		if len(s) == 0 {
			continue
		}
		if len(s) > cfg.MaxLen {
			s = s[:cfg.MaxLen]
		}
		r.data = append(r.data, m.Vocab.ids(s))
	}
	if len(r.data) == 0 {
		return nil, errors.New("language model training: no sentence")
	}
	_, err := kit.Fit(ctx, r, kit.FitConfig{Epochs: cfg.Epochs, LearningRate: cfg.LearningRate, Warmup: cfg.Warmup, MaxGradNorm: cfg.MaxGradNorm}, o)
	if err != nil {
		return nil, err
	}
	return r.st.History, nil
}

// fitRun is a run of Train as kit.Fit drives it.
type fitRun struct {
	m       *Model
	cfg     TrainConfig
	data    [][]int64 // the sentences' ids, cut to MaxLen
	heldout [][]string
	log     *slog.Logger
	st      fitState
	batches [][]int
	dropout *rand.Rand
}

// fitState is the models' part of a checkpoint's state.json.
type fitState struct {
	History []EpochReport `json:"history"`
}

var _ kit.Checkpointer = (*fitRun)(nil)

func (r *fitRun) Device() gotch.Device      { return r.m.device }
func (r *fitRun) Weights() []ts.NamedTensor { return r.m.named() }
func (r *fitRun) State() any                { return &r.st }

func (r *fitRun) StepsPerEpoch() (int, error) {
	return (len(r.data) + r.cfg.BatchSize - 1) / r.cfg.BatchSize, nil
}

func (r *fitRun) StartEpoch(epoch int) (int, error) {
	r.batches = kit.LengthBatches(len(r.data), func(i int) int { return len(r.data[i]) }, r.cfg.BatchSize, rand.New(rand.NewPCG(r.cfg.Seed, 1000+uint64(epoch))))
	r.dropout = rand.New(rand.NewPCG(r.cfg.Seed, 2000+uint64(epoch)))
	return len(r.batches), nil
}

func (r *fitRun) Step(_ context.Context, s *kit.Step) (kit.StepResult, error) {
	ids := r.batches[s.Batch]
	sents := make([][]int64, len(ids))
	for i, id := range ids {
		sents[i] = r.data[id]
	}
	b := newBatch(sents)
	loss, err := r.m.step(b, s, r.dropout)
	return kit.StepResult{Loss: loss, Tokens: len(b.valid)}, err
}

// EndEpoch scores the held-out text, adds the epoch's report to the
// history and logs it.
func (r *fitRun) EndEpoch(e kit.EpochStats) error {
	rep := EpochReport{Epoch: e.Epoch, TrainLoss: e.Loss, Seconds: e.Seconds, TokensPerSec: e.TokensPerSec}
	if len(r.heldout) > 0 {
		p, err := r.m.Perplexity(r.heldout, 64)
		if err != nil {
			return fmt.Errorf("held-out text: %w", err)
		}
		rep.Heldout = &p
	}
	r.st.History = append(r.st.History, rep)
	args := []any{"epoch", e.Epoch, "loss", rep.TrainLoss, "tokens_per_sec", math.Round(rep.TokensPerSec)}
	if rep.Heldout != nil {
		args = append(args, "heldout_ppl_fwd", rep.Heldout.Forward, "heldout_ppl_bwd", rep.Heldout.Backward)
	}
	r.log.Info("language model epoch done", args...)
	return nil
}

// SaveCheckpoint saves the models whole (Load reads them back).
func (r *fitRun) SaveCheckpoint(dir string) error { return r.m.Save(dir) }

func (r *fitRun) LoadCheckpoint(dir string) error {
	return r.m.loadWeights(filepath.Join(dir, WeightsFile))
}

// step trains on one batch and returns its loss.
func (m *Model) step(b *batch, s *kit.Step, dropout *rand.Rand) (float64, error) {
	g := kit.NewGraph(m.device)
	defer g.Free()
	var loss float64
	err := kit.Guard(func() {
		l := m.loss(g, b, true, dropout)
		s.Update(g, l)
		loss = float64(kit.Float32s(l)[0])
	})
	return loss, err
}

// Perplexity scores sentences with both models: exp of the mean negative
// log-likelihood per target (each word and the sentence end), without
// dropout. It locks the calling goroutine to its OS thread.
func (m *Model) Perplexity(sentences [][]string, batchSize int) (Perplexity, error) {
	var sum [2]float64
	n := 0
	err := m.eachBatch(sentences, batchSize, func(g *kit.Graph, b *batch) {
		for d := range 2 {
			sum[d] += float64(kit.Float32s(m.nll(g, b, d, false, nil))[0])
		}
		n += len(b.valid)
	})
	if err != nil {
		return Perplexity{}, err
	}
	if n == 0 {
		return Perplexity{}, errors.New("perplexity of no text")
	}
	return Perplexity{Forward: math.Exp(sum[Forward] / float64(n)), Backward: math.Exp(sum[Backward] / float64(n)), Tokens: n}, nil
}

// eachBatch runs f without gradients over batches of the (non-empty)
// sentences in order, one graph per batch.
func (m *Model) eachBatch(sentences [][]string, batchSize int, f func(g *kit.Graph, b *batch)) error {
	var err error
	kit.NoGrad(func() {
		for start := 0; start < len(sentences) && err == nil; start += batchSize {
			var sents [][]int64
			for _, s := range sentences[start:min(start+batchSize, len(sentences))] {
				if len(s) > 0 {
					sents = append(sents, m.Vocab.ids(s))
				}
			}
			if len(sents) == 0 {
				continue
			}
			g := kit.NewGraph(m.device)
			err = kit.Guard(func() { f(g, newBatch(sents)) })
			g.Free()
		}
	})
	return err
}
