package encoder

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

// TrainConfig are the hyperparameters of a pretraining run.
type TrainConfig struct {
	Epochs int `json:"epochs"`
	// MaxSteps, when positive, ends the run after that many updates (the
	// schedule decays to 0 there), whatever the epochs.
	MaxSteps     int     `json:"max_steps"`
	BatchSize    int     `json:"batch_size"` // sentences
	LearningRate float64 `json:"learning_rate"`
	Warmup       float64 `json:"warmup"` // fraction of the steps
	MaxGradNorm  float64 `json:"max_grad_norm"`
	Masking      Masking `json:"masking"`
	Seed         uint64  `json:"seed"`
}

// DefaultTrainConfig trains for 3 epochs with Adam at 1e-3 (a small
// model's rate; BERT-base used 1e-4), 6% warm-up as RoBERTa.
func DefaultTrainConfig() TrainConfig {
	return TrainConfig{Epochs: 3, BatchSize: 32, LearningRate: 1e-3, Warmup: 0.06, MaxGradNorm: 1, Masking: DefaultMasking(), Seed: 1}
}

func (c TrainConfig) validate() error {
	mk := c.Masking
	switch {
	case c.Epochs < 1 || c.BatchSize < 1 || c.LearningRate <= 0 || c.MaxSteps < 0:
		return fmt.Errorf("epochs %d, batch size %d, learning rate %v: all must be positive (max steps %d: not negative)", c.Epochs, c.BatchSize, c.LearningRate, c.MaxSteps)
	case c.Warmup < 0 || c.Warmup > 1 || c.MaxGradNorm < 0:
		return fmt.Errorf("warmup %v, max grad norm %v out of range", c.Warmup, c.MaxGradNorm)
	case mk.Rate <= 0 || mk.Rate > 1 || mk.MaskProb < 0 || mk.RandomProb < 0 || mk.MaskProb+mk.RandomProb > 1:
		return fmt.Errorf("masking %+v: want a rate in (0, 1] and mask + random probabilities within [0, 1]", mk)
	}
	return nil
}

// EpochReport is what one epoch achieved.
type EpochReport struct {
	Epoch        int      `json:"epoch"`
	Steps        int      `json:"steps"`
	TrainLoss    float64  `json:"train_loss"` // mean over the steps of their mean NLL per predicted word
	Heldout      *Heldout `json:"heldout,omitempty"`
	TokensPerSec float64  `json:"tokens_per_sec"` // tokens read (all, not only the predicted ones)
	Seconds      float64  `json:"seconds"`
}

// Heldout is the masked-LM perplexity on held-out text.
type Heldout struct {
	Perplexity float64 `json:"perplexity"`
	Predicted  int     `json:"predicted"` // words scored (masked, in the vocabulary)
	Tokens     int     `json:"tokens"`
}

// Progress is a live report of a run, after every step.
type Progress = kit.Progress

// Options of Train: where it logs, reports and checkpoints (Resume: the
// directory of a checkpoint to continue from).
type Options = kit.FitOptions

const (
	// heldoutSeed draws the held-out masks: the same every evaluation, so
	// that perplexities of epochs and runs compare.
	heldoutSeed = 0x4e1d
)

// Train pretrains the encoder on sentences with the masked-LM objective,
// reporting held-out perplexity after every epoch when heldout is not
// empty, on kit.Fit. Sentences longer than the model's MaxLen are read in
// windows. It computes on an OS thread of its own (kit.OnComputeThread)
// and waits.
func Train(ctx context.Context, m *Model, sentences, heldout [][]string, cfg TrainConfig, o Options) ([]EpochReport, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("encoder pretraining: %w", err)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	r := &fitRun{m: m, cfg: cfg, data: windows(sentences, m.Config.MaxLen), heldout: windows(heldout, m.Config.MaxLen), log: o.Log}
	if len(r.data) == 0 {
		return nil, errors.New("encoder pretraining: no sentence")
	}
	perEpoch := (len(r.data) + cfg.BatchSize - 1) / cfg.BatchSize
	epochs := cfg.Epochs
	if cfg.MaxSteps > 0 {
		r.maxSteps = cfg.MaxSteps
		epochs = min(epochs, (cfg.MaxSteps+perEpoch-1)/perEpoch)
	}
	_, err := kit.Fit(ctx, r, kit.FitConfig{Epochs: epochs, LearningRate: cfg.LearningRate, Warmup: cfg.Warmup, MaxGradNorm: cfg.MaxGradNorm}, o)
	if err != nil {
		return nil, err
	}
	return r.st.History, nil
}

// fitRun is a run of Train as kit.Fit drives it.
type fitRun struct {
	m        *Model
	cfg      TrainConfig
	data     [][]string // windows of at most MaxLen tokens
	heldout  [][]string
	log      *slog.Logger
	maxSteps int // 0: every epoch whole
	st       fitState
	batches  [][]int
	masks    *rand.Rand
	dropout  *rand.Rand
}

// fitState is the encoder's part of a checkpoint's state.json.
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

// StartEpoch draws the epoch's batches; masks and dropout come from the
// epoch's own generators, so a run resumed at an epoch boundary draws
// what the whole run would. With max_steps, the last epoch is cut short
// (the schedule stays that of whole epochs).
func (r *fitRun) StartEpoch(epoch int) (int, error) {
	r.batches = kit.LengthBatches(len(r.data), func(i int) int { return len(r.data[i]) }, r.cfg.BatchSize, rand.New(rand.NewPCG(r.cfg.Seed, 1000+uint64(epoch))))
	r.masks = rand.New(rand.NewPCG(r.cfg.Seed, 2000+uint64(epoch)))
	r.dropout = rand.New(rand.NewPCG(r.cfg.Seed, 3000+uint64(epoch)))
	n := len(r.batches)
	if r.maxSteps > 0 {
		n = max(0, min(n, r.maxSteps-(epoch-1)*n))
	}
	return n, nil
}

func (r *fitRun) Step(_ context.Context, s *kit.Step) (kit.StepResult, error) {
	ids := r.batches[s.Batch]
	sents := make([]maskedSentence, len(ids))
	for i, id := range ids {
		sents[i] = r.m.Vocab.mask(r.data[id], r.cfg.Masking, r.masks)
	}
	b := newBatch(sents)
	loss, err := r.m.step(b, s, r.dropout)
	return kit.StepResult{Loss: loss, Tokens: b.tokens, Skipped: len(b.predict) == 0}, err
}

// EndEpoch scores the held-out text, adds the epoch's report to the
// history and logs it.
func (r *fitRun) EndEpoch(e kit.EpochStats) error {
	rep := EpochReport{Epoch: e.Epoch, Steps: e.Steps, TrainLoss: e.Loss, Seconds: e.Seconds, TokensPerSec: e.TokensPerSec}
	if len(r.heldout) > 0 {
		h, err := r.m.heldoutPerplexity(r.heldout, r.cfg.Masking, 64)
		if err != nil {
			return fmt.Errorf("held-out text: %w", err)
		}
		rep.Heldout = &h
	}
	r.st.History = append(r.st.History, rep)
	args := []any{"epoch", e.Epoch, "steps", rep.Steps, "loss", rep.TrainLoss, "tokens_per_sec", math.Round(rep.TokensPerSec)}
	if rep.Heldout != nil {
		args = append(args, "heldout_ppl", rep.Heldout.Perplexity)
	}
	r.log.Info("encoder epoch done", args...)
	return nil
}

// SaveCheckpoint saves the encoder whole (Load reads it back).
func (r *fitRun) SaveCheckpoint(dir string) error { return r.m.Save(dir) }

func (r *fitRun) LoadCheckpoint(dir string) error {
	return r.m.loadWeights(filepath.Join(dir, WeightsFile))
}

// windows cuts sentences longer than maxLen into pieces of at most maxLen
// tokens and drops empty ones.
func windows(sentences [][]string, maxLen int) [][]string {
	var out [][]string
	for _, s := range sentences {
		for len(s) > maxLen {
			out = append(out, s[:maxLen])
			s = s[maxLen:]
		}
		if len(s) > 0 {
			out = append(out, s)
		}
	}
	return out
}

// step trains on one batch with the mean loss over its predicted words
// and returns that mean.
func (m *Model) step(b *batch, s *kit.Step, dropout *rand.Rand) (float64, error) {
	if len(b.predict) == 0 {
		return 0, nil // nothing chosen (a batch of one-word sentences can draw no mask)
	}
	g := kit.NewGraph(m.device)
	defer g.Free()
	var loss float64
	err := kit.Guard(func() {
		total, n := m.mlmLoss(g, b, true, dropout)
		mean := g.T(total.MulScalar(g.Scalar(1/float64(n)), false))
		s.Update(g, mean)
		loss = float64(kit.Float32s(mean)[0])
	})
	return loss, err
}

// Perplexity is the masked-LM perplexity of sentences: exp of the mean
// negative log-likelihood of the masked in-vocabulary words, the masks
// drawn with mk from a fixed seed (the same words every time), without
// dropout. It locks the calling goroutine to its OS thread.
func (m *Model) Perplexity(sentences [][]string, mk Masking, batchSize int) (Heldout, error) {
	var h Heldout
	var err error
	kit.OnComputeThread(func(func()) { h, err = m.heldoutPerplexity(windows(sentences, m.Config.MaxLen), mk, batchSize) })
	return h, err
}

func (m *Model) heldoutPerplexity(sentences [][]string, mk Masking, batchSize int) (Heldout, error) {
	rng := rand.New(rand.NewPCG(heldoutSeed, 0))
	var sum float64
	var h Heldout
	var err error
	kit.NoGrad(func() {
		for start := 0; start < len(sentences) && err == nil; start += batchSize {
			var sents []maskedSentence
			for _, s := range sentences[start:min(start+batchSize, len(sentences))] {
				sents = append(sents, m.Vocab.mask(s, mk, rng))
			}
			b := newBatch(sents)
			h.Tokens += b.tokens
			if len(b.predict) == 0 {
				continue
			}
			g := kit.NewGraph(m.device)
			err = kit.Guard(func() {
				total, k := m.mlmLoss(g, b, false, nil)
				sum += float64(kit.Float32s(total)[0])
				h.Predicted += k
			})
			g.Free()
		}
	})
	if err != nil {
		return Heldout{}, err
	}
	if h.Predicted == 0 {
		return Heldout{}, errors.New("perplexity: no word of the vocabulary was masked")
	}
	h.Perplexity = math.Exp(sum / float64(h.Predicted))
	return h, nil
}
