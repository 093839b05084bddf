package lm

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
)

// Train fits the models to sentences (tokens), reporting held-out
// perplexity after every epoch when heldout is not empty. It computes on
// an OS thread of its own (kit.OnComputeThread) and waits for it.
func Train(ctx context.Context, m *Model, sentences, heldout [][]string, cfg TrainConfig, o Options) (history []EpochReport, err error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("language model training: %w", err)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	kit.OnComputeThread(func(refresh func()) {
		history, err = trainOnThread(ctx, m, sentences, heldout, cfg, o, refresh)
	})
	return history, err
}

// trainOnThread is Train on the computing thread.
func trainOnThread(ctx context.Context, m *Model, sentences, heldout [][]string, cfg TrainConfig, o Options, refresh func()) ([]EpochReport, error) {
	var data [][]int64
	tokens := 0
	for _, s := range sentences {
		if len(s) == 0 {
			continue
		}
		if len(s) > cfg.MaxLen {
			s = s[:cfg.MaxLen]
		}
		data = append(data, m.Vocab.ids(s))
		tokens += len(s) + 1
	}
	if len(data) == 0 {
		return nil, errors.New("language model training: no sentence")
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
		o.Log.Info("resumed language model training", "epochs_done", st.Epoch, "step", st.Step)
	}
	perEpoch := (len(data) + cfg.BatchSize - 1) / cfg.BatchSize
	total := perEpoch * cfg.Epochs
	warmup := int(math.Round(cfg.Warmup * float64(total)))
	for epoch := st.Epoch + 1; epoch <= cfg.Epochs; epoch++ {
		refresh()
		rep := EpochReport{Epoch: epoch}
		start := time.Now()
		batches := batchesOf(data, cfg.BatchSize, rand.New(rand.NewPCG(cfg.Seed, 1000+uint64(epoch))))
		dropout := rand.New(rand.NewPCG(cfg.Seed, 2000+uint64(epoch)))
		var lossSum float64
		seen := 0
		for _, ids := range batches {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			sents := make([][]int64, len(ids))
			for i, id := range ids {
				sents[i] = data[id]
			}
			b := newBatch(sents)
			loss, err := m.step(b, opt, kit.LearningRate(cfg.LearningRate, st.Step, warmup, total), dropout)
			if err != nil {
				return nil, fmt.Errorf("epoch %d, step %d: %w", epoch, st.Step+1, err)
			}
			if math.IsNaN(loss) || math.IsInf(loss, 0) {
				return nil, fmt.Errorf("epoch %d, step %d: the loss diverged (%v)", epoch, st.Step+1, loss)
			}
			st.Step++
			lossSum += loss
			seen += len(b.valid)
			if o.Progress != nil {
				o.Progress(Progress{Epoch: epoch, Epochs: cfg.Epochs, Step: st.Step, Steps: total, Loss: loss,
					TokensPerSec: float64(seen) / time.Since(start).Seconds()})
			}
		}
		rep.TrainLoss = lossSum / float64(len(batches))
		rep.Seconds = time.Since(start).Seconds()
		rep.TokensPerSec = float64(seen) / rep.Seconds
		if len(heldout) > 0 {
			p, err := m.Perplexity(heldout, 64)
			if err != nil {
				return nil, fmt.Errorf("epoch %d: held-out text: %w", epoch, err)
			}
			rep.Heldout = &p
		}
		st.Epoch = epoch
		st.History = append(st.History, rep)
		args := []any{"epoch", epoch, "loss", rep.TrainLoss, "tokens_per_sec", math.Round(rep.TokensPerSec)}
		if rep.Heldout != nil {
			args = append(args, "heldout_ppl_fwd", rep.Heldout.Forward, "heldout_ppl_bwd", rep.Heldout.Backward)
		}
		o.Log.Info("language model epoch done", args...)
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

// step trains on one batch and returns its loss.
func (m *Model) step(b *batch, opt *kit.Adam, lr float64, dropout *rand.Rand) (float64, error) {
	g := kit.NewGraph(m.device)
	defer g.Free()
	var loss float64
	err := kit.Guard(func() {
		l := m.loss(g, b, true, dropout)
		opt.ZeroGrad(g)
		g.Check(l.Backward())
		opt.Update(g, lr)
		loss = float64(kit.Float32s(l)[0])
	})
	return loss, err
}

// batchesOf shuffles the sentences, sorts pools of 20 batches by length
// (little padding) and shuffles the batches.
func batchesOf(data [][]int64, size int, rng *rand.Rand) [][]int {
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
