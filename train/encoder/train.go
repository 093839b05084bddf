package encoder

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"time"

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
	TrainLoss    float64  `json:"train_loss"` // mean NLL per predicted word
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

// Progress is a live report of a run, after every batch.
type Progress struct {
	Epoch, Epochs, Step, Steps int
	Loss, TokensPerSec         float64
}

// Options of Train.
type Options struct {
	Log      *slog.Logger
	Progress func(Progress)
	// Checkpoint, if set, is called after every epoch with a directory
	// holding the run's state; it must copy what it keeps before returning.
	Checkpoint func(dir string, epoch int) error
	// StateDir is where the state is written; Resume continues from a
	// state found there (a copy of a directory given to Checkpoint).
	StateDir string
	Resume   bool
}

type runState struct {
	Epoch   int           `json:"epoch"`
	Step    int           `json:"step"`
	History []EpochReport `json:"history"`
}

const (
	stateFile     = "state.json"
	optimizerFile = "optimizer.pt"
	// heldoutSeed draws the held-out masks: the same every evaluation, so
	// that perplexities of epochs and runs compare.
	heldoutSeed = 0x4e1d
)

// Train pretrains the encoder on sentences with the masked-LM objective,
// reporting held-out perplexity after every epoch when heldout is not
// empty. Sentences longer than the model's MaxLen are read in windows. It
// computes on an OS thread of its own (kit.OnComputeThread) and waits.
func Train(ctx context.Context, m *Model, sentences, heldout [][]string, cfg TrainConfig, o Options) (history []EpochReport, err error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("encoder pretraining: %w", err)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	kit.OnComputeThread(func(refresh func()) {
		history, err = trainOnThread(ctx, m, windows(sentences, m.Config.MaxLen), windows(heldout, m.Config.MaxLen), cfg, o, refresh)
	})
	return history, err
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

// stepsOf is the number of updates of a run over n sentences.
func stepsOf(n int, cfg TrainConfig) (perEpoch, total int) {
	perEpoch = (n + cfg.BatchSize - 1) / cfg.BatchSize
	total = perEpoch * cfg.Epochs
	if cfg.MaxSteps > 0 {
		total = min(total, cfg.MaxSteps)
	}
	return perEpoch, total
}

func trainOnThread(ctx context.Context, m *Model, data, heldout [][]string, cfg TrainConfig, o Options, refresh func()) ([]EpochReport, error) {
	if len(data) == 0 {
		return nil, errors.New("encoder pretraining: no sentence")
	}
	names, params := m.parameters()
	opt, err := kit.NewAdam(names, params, cfg.MaxGradNorm)
	if err != nil {
		return nil, err
	}
	defer opt.Close()
	var st runState
	if o.Resume {
		if err := m.restore(o.StateDir, opt, &st); err != nil {
			return nil, fmt.Errorf("resuming: %w", err)
		}
		o.Log.Info("resumed encoder pretraining", "epochs_done", st.Epoch, "step", st.Step)
	}
	_, total := stepsOf(len(data), cfg)
	warmup := int(math.Round(cfg.Warmup * float64(total)))
	for epoch := st.Epoch + 1; epoch <= cfg.Epochs && st.Step < total; epoch++ {
		refresh()
		rep := EpochReport{Epoch: epoch}
		start := time.Now()
		batches := batchesOf(data, cfg.BatchSize, rand.New(rand.NewPCG(cfg.Seed, 1000+uint64(epoch))))
		// Masks and dropout of an epoch come from its own generators, so a
		// run resumed at an epoch boundary draws what the whole run would.
		masks := rand.New(rand.NewPCG(cfg.Seed, 2000+uint64(epoch)))
		dropout := rand.New(rand.NewPCG(cfg.Seed, 3000+uint64(epoch)))
		var lossSum float64
		predicted, seen := 0, 0
		for _, ids := range batches {
			if st.Step >= total {
				break
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			sents := make([]maskedSentence, len(ids))
			for i, id := range ids {
				sents[i] = m.Vocab.mask(data[id], cfg.Masking, masks)
			}
			b := newBatch(sents)
			sum, k, err := m.step(b, opt, kit.LearningRate(cfg.LearningRate, st.Step, warmup, total), dropout)
			if err != nil {
				return nil, fmt.Errorf("epoch %d, step %d: %w", epoch, st.Step+1, err)
			}
			if math.IsNaN(sum) || math.IsInf(sum, 0) {
				return nil, fmt.Errorf("epoch %d, step %d: the loss diverged (%v)", epoch, st.Step+1, sum)
			}
			st.Step++
			rep.Steps++
			lossSum += sum
			predicted += k
			seen += b.tokens
			if o.Progress != nil {
				loss := 0.0
				if k > 0 {
					loss = sum / float64(k)
				}
				o.Progress(Progress{Epoch: epoch, Epochs: cfg.Epochs, Step: st.Step, Steps: total, Loss: loss,
					TokensPerSec: float64(seen) / time.Since(start).Seconds()})
			}
		}
		if predicted > 0 {
			rep.TrainLoss = lossSum / float64(predicted)
		}
		rep.Seconds = time.Since(start).Seconds()
		rep.TokensPerSec = float64(seen) / rep.Seconds
		if len(heldout) > 0 {
			h, err := m.heldout(heldout, cfg.Masking, 64)
			if err != nil {
				return nil, fmt.Errorf("epoch %d: held-out text: %w", epoch, err)
			}
			rep.Heldout = &h
		}
		st.Epoch = epoch
		st.History = append(st.History, rep)
		args := []any{"epoch", epoch, "steps", rep.Steps, "loss", rep.TrainLoss, "tokens_per_sec", math.Round(rep.TokensPerSec)}
		if rep.Heldout != nil {
			args = append(args, "heldout_ppl", rep.Heldout.Perplexity)
		}
		o.Log.Info("encoder epoch done", args...)
		if o.Checkpoint != nil {
			if err := m.saveState(o.StateDir, opt, &st); err != nil {
				return nil, err
			}
			if err := o.Checkpoint(o.StateDir, epoch); err != nil {
				return nil, fmt.Errorf("checkpoint after epoch %d: %w", epoch, err)
			}
		}
	}
	return st.History, nil
}

// step trains on one batch with the mean loss over its predicted words
// and returns their summed loss and their number.
func (m *Model) step(b *batch, opt *kit.Adam, lr float64, dropout *rand.Rand) (float64, int, error) {
	if len(b.predict) == 0 {
		return 0, 0, nil // nothing chosen (a batch of one-word sentences can draw no mask)
	}
	g := kit.NewGraph(m.device)
	defer g.Free()
	var sum float64
	var k int
	err := kit.Guard(func() {
		total, n := m.mlmLoss(g, b, true, dropout)
		k = n
		mean := g.T(total.MulScalar(g.Scalar(1/float64(n)), false))
		opt.ZeroGrad(g)
		g.Check(mean.Backward())
		opt.Update(g, lr)
		sum = float64(kit.Float32s(total)[0])
	})
	return sum, k, err
}

// batchesOf shuffles the sentences, sorts pools of 20 batches by length
// (little padding) and shuffles the batches.
func batchesOf(data [][]string, size int, rng *rand.Rand) [][]int {
	order := rng.Perm(len(data))
	var out [][]int
	pool := 20 * size
	for start := 0; start < len(order); start += pool {
		p := order[start:min(start+pool, len(order))]
		slices.SortStableFunc(p, func(a, b int) int { return len(data[b]) - len(data[a]) })
		for i := 0; i < len(p); i += size {
			out = append(out, p[i:min(i+size, len(p))])
		}
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// Perplexity is the masked-LM perplexity of sentences: exp of the mean
// negative log-likelihood of the masked in-vocabulary words, the masks
// drawn with mk from a fixed seed (the same words every time), without
// dropout. It locks the calling goroutine to its OS thread.
func (m *Model) Perplexity(sentences [][]string, mk Masking, batchSize int) (Heldout, error) {
	var h Heldout
	var err error
	kit.OnComputeThread(func(func()) { h, err = m.heldout(windows(sentences, m.Config.MaxLen), mk, batchSize) })
	return h, err
}

func (m *Model) heldout(sentences [][]string, mk Masking, batchSize int) (Heldout, error) {
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

func (m *Model) saveState(dir string, opt *kit.Adam, st *runState) error {
	if err := m.Save(dir); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := kit.SaveTensors(opt.State(), filepath.Join(dir, optimizerFile)); err != nil {
		return fmt.Errorf("checkpoint: optimizer: %w", err)
	}
	b, err := json.Marshal(st)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, stateFile), b, 0o644)
	}
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

func (m *Model) restore(dir string, opt *kit.Adam, st *runState) error {
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, st); err != nil {
		return fmt.Errorf("%s: %w", stateFile, err)
	}
	if err := m.loadWeights(filepath.Join(dir, WeightsFile)); err != nil {
		return err
	}
	moments, err := kit.LoadTensors(filepath.Join(dir, optimizerFile), m.device)
	if err != nil {
		return fmt.Errorf("%s: %w", optimizerFile, err)
	}
	defer kit.DropTensors(moments)
	return opt.Restore(moments, st.Step)
}
