package vsl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/eval"
	"github.com/nerflow/nerflow/kit"
)

// TrainConfig are the hyperparameters of a training run.
type TrainConfig struct {
	Epochs    int `json:"epochs"`     // passes over the labeled sentences
	BatchSize int `json:"batch_size"` // sentences per labeled batch, and per unlabeled batch
	// Each step pairs a labeled batch with an unlabeled one (when there is
	// unlabeled text), cycling through the unlabeled sentences.
	LearningRate float64 `json:"learning_rate"`
	Warmup       float64 `json:"warmup"` // fraction of the steps of learning-rate warm-up
	MaxGradNorm  float64 `json:"max_grad_norm"`
	// KLWeight is the weight of the KL terms after annealing; KLWarmup the
	// steps over which it rises linearly from 0.
	KLWeight float64 `json:"kl_weight"`
	KLWarmup int     `json:"kl_warmup"`
	// ClassWeight weighs the labeled tokens' cross entropy against the
	// negative ELBO.
	ClassWeight float64 `json:"class_weight"`
	// UnlabeledWeight weighs an unlabeled batch's loss (its negative ELBO)
	// against the labeled batch's it is paired with.
	UnlabeledWeight float64 `json:"unlabeled_weight"`
	Patience        int     `json:"patience"` // epochs without a better dev F1 before stopping (0: never)
	Seed            uint64  `json:"seed"`
}

// DefaultTrainConfig trains for 30 epochs of the labeled sentences (on
// CoNLL-2003's 10%, dev F1 still rose through the 15th).
func DefaultTrainConfig() TrainConfig {
	return TrainConfig{Epochs: 30, BatchSize: 32, LearningRate: 1e-3, Warmup: 0.05, MaxGradNorm: 5,
		KLWeight: 1, KLWarmup: 300, ClassWeight: 10, UnlabeledWeight: 1, Seed: 1}
}

func (c TrainConfig) validate() error {
	if c.Epochs < 1 || c.BatchSize < 1 || c.LearningRate <= 0 {
		return fmt.Errorf("epochs %d, batch size %d, learning rate %v: all must be positive", c.Epochs, c.BatchSize, c.LearningRate)
	}
	if c.Warmup < 0 || c.Warmup > 1 || c.MaxGradNorm < 0 || c.KLWeight < 0 || c.KLWarmup < 0 || c.ClassWeight < 0 || c.UnlabeledWeight < 0 || c.Patience < 0 {
		return fmt.Errorf("warmup %v, max grad norm %v, kl weight %v, kl warmup %d, class weight %v, patience %d: out of range",
			c.Warmup, c.MaxGradNorm, c.KLWeight, c.KLWarmup, c.ClassWeight, c.Patience)
	}
	return nil
}

// EpochReport is what one epoch achieved; the loss parts are means per
// token over the epoch.
type EpochReport struct {
	Epoch     int     `json:"epoch"`
	Loss      float64 `json:"loss"`
	Recon     float64 `json:"recon"`      // labeled and unlabeled tokens
	KL        float64 `json:"kl"`         // unweighted
	Class     float64 `json:"class"`      // labeled tokens
	KLWeight  float64 `json:"kl_weight"`  // at the epoch's end
	DevF1     float64 `json:"dev_f1"`     // with a dev set
	Seconds   float64 `json:"seconds"`    // training, not scoring
	Sentences int     `json:"sentences"`  // labeled and unlabeled seen
	Unlabeled int     `json:"unlabeled"`  // unlabeled sentences seen
	TokensSec float64 `json:"tokens_sec"` // throughput
}

// Result summarizes a run.
type Result struct {
	Epochs    []EpochReport `json:"epochs"`
	BestEpoch int           `json:"best_epoch"` // 0 without a dev set
	BestDevF1 float64       `json:"best_dev_f1"`
	Steps     int           `json:"steps"`
}

// Progress is a live report, after every step.
type Progress struct {
	Epoch, Epochs, Step, Steps int
	Loss                       float64
}

// Options of Train.
type Options struct {
	Log      *slog.Logger
	Progress func(Progress)
}

// Train fits m to the labeled sentences (tags in any scheme) and the
// unlabeled ones (tags ignored; may be nil). With a dev set, every epoch
// is scored on it (entity micro F1) and the best epoch's weights are kept.
// It computes on an OS thread of its own (kit.OnComputeThread) and waits
// for it.
func Train(ctx context.Context, m *Model, labeled, unlabeled, dev *corpus.Corpus, cfg TrainConfig, o Options) (res *Result, err error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("vsl training: %w", err)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	kit.OnComputeThread(func(refresh func()) {
		res, err = trainOnThread(ctx, m, labeled, unlabeled, dev, cfg, o, refresh)
	})
	return res, err
}

// trainOnThread is Train on the computing thread.
func trainOnThread(ctx context.Context, m *Model, labeled, unlabeled, dev *corpus.Corpus, cfg TrainConfig, o Options, refresh func()) (*Result, error) {
	lab, err := m.encode(labeled, true)
	if err != nil {
		return nil, fmt.Errorf("labeled set: %w", err)
	}
	var unl, devExs []example
	if unlabeled != nil {
		if unl, err = m.encode(unlabeled, false); err != nil {
			return nil, fmt.Errorf("unlabeled set: %w", err)
		}
	}
	var devGold [][]string
	if dev != nil {
		if devExs, err = m.encode(dev, false); err != nil {
			return nil, fmt.Errorf("dev set: %w", err)
		}
		for i, s := range dev.Sentences {
			if len(s.Tags) != len(s.Tokens) {
				return nil, fmt.Errorf("dev set: sentence %d: %d tokens but %d tags", i+1, len(s.Tokens), len(s.Tags))
			}
			devGold = append(devGold, s.Tags)
		}
	}
	perEpoch := len(batches(lab, cfg.BatchSize, rand.New(rand.NewPCG(cfg.Seed, 0))))
	if perEpoch == 0 {
		return nil, errors.New("vsl training: the labeled set has no tokens")
	}
	names, params := m.parameters()
	opt, err := kit.NewAdam(names, params, cfg.MaxGradNorm)
	if err != nil {
		return nil, err
	}
	defer opt.Close()
	best, err := os.MkdirTemp("", "nerflow-vsl-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(best)
	bestFile := filepath.Join(best, WeightsFile)

	total := perEpoch * cfg.Epochs
	warmup := int(math.Round(cfg.Warmup * float64(total)))
	res := &Result{}
	stream := &unlabeledStream{exs: unl, size: cfg.BatchSize, seed: cfg.Seed}
	sinceBest := 0
	o.Log.Info("training vsl", "variant", m.Config.Variant, "labeled", len(lab), "unlabeled", len(unl), "epochs", cfg.Epochs, "steps", total)
	for epoch := 1; epoch <= cfg.Epochs && (cfg.Patience == 0 || dev == nil || sinceBest < cfg.Patience); epoch++ {
		refresh()
		rep, err := m.trainEpoch(ctx, epoch, lab, stream, opt, cfg, res, total, warmup, o)
		if err != nil {
			return nil, err
		}
		if dev != nil {
			if rep.DevF1, err = m.score(devExs, devGold); err != nil {
				return nil, fmt.Errorf("epoch %d: dev set: %w", epoch, err)
			}
			sinceBest++
			if res.BestEpoch == 0 || rep.DevF1 > res.BestDevF1 {
				res.BestEpoch, res.BestDevF1, sinceBest = epoch, rep.DevF1, 0
				if err := kit.SaveTensors(m.named(), bestFile); err != nil {
					return nil, fmt.Errorf("best epoch's weights: %w", err)
				}
			}
		}
		res.Epochs = append(res.Epochs, rep)
		o.Log.Info("vsl epoch done", "epoch", epoch, "loss", rep.Loss, "recon", rep.Recon, "kl", rep.KL, "class", rep.Class,
			"kl_weight", rep.KLWeight, "dev_f1", rep.DevF1, "seconds", math.Round(rep.Seconds))
	}
	if res.BestEpoch > 0 {
		if err := m.loadWeights(bestFile); err != nil {
			return nil, fmt.Errorf("best epoch's weights: %w", err)
		}
	}
	return res, nil
}

// unlabeledStream deals unlabeled batches one at a time, reshuffled at
// every pass.
type unlabeledStream struct {
	exs     []example
	size    int
	seed    uint64
	pass    uint64
	pending [][]int
}

func (s *unlabeledStream) next() []int {
	if len(s.exs) == 0 {
		return nil
	}
	if len(s.pending) == 0 {
		s.pass++
		s.pending = batches(s.exs, s.size, rand.New(rand.NewPCG(s.seed, 3000+s.pass)))
		if len(s.pending) == 0 {
			return nil
		}
	}
	b := s.pending[0]
	s.pending = s.pending[1:]
	return b
}

func (m *Model) trainEpoch(ctx context.Context, epoch int, lab []example, unl *unlabeledStream, opt *kit.Adam, cfg TrainConfig,
	res *Result, total, warmup int, o Options) (EpochReport, error) {
	rep := EpochReport{Epoch: epoch}
	start := time.Now()
	rng := rand.New(rand.NewPCG(cfg.Seed, 2000+uint64(epoch)))
	var sums [4]float64 // loss per token summed over steps, recon, kl, class
	var tokens, labTokens, steps int
	for _, ids := range batches(lab, cfg.BatchSize, rand.New(rand.NewPCG(cfg.Seed, 1000+uint64(epoch)))) {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		w := Weights{KL: KLWeight(cfg.KLWeight, res.Steps, cfg.KLWarmup), Class: cfg.ClassWeight, Unlabeled: cfg.UnlabeledWeight}
		bs := []*batch{newBatch(lab, ids)}
		rep.Sentences += len(ids)
		if u := unl.next(); u != nil {
			bs = append(bs, newBatch(unl.exs, u))
			rep.Sentences += len(u)
			rep.Unlabeled += len(u)
		}
		st, err := m.step(bs, w, opt, kit.LearningRate(cfg.LearningRate, res.Steps, warmup, total), rng)
		if err != nil {
			return rep, fmt.Errorf("epoch %d, step %d: %w", epoch, res.Steps+1, err)
		}
		if math.IsNaN(st.loss) || math.IsInf(st.loss, 0) {
			return rep, fmt.Errorf("epoch %d, step %d: the loss diverged (%v)", epoch, res.Steps+1, st.loss)
		}
		res.Steps++
		steps++
		sums[0] += st.loss
		sums[1] += st.recon
		sums[2] += st.kl
		sums[3] += st.class
		tokens += st.tokens
		labTokens += st.labeled
		rep.KLWeight = w.KL
		if o.Progress != nil {
			o.Progress(Progress{Epoch: epoch, Epochs: cfg.Epochs, Step: res.Steps, Steps: total, Loss: st.loss})
		}
	}
	rep.Seconds = time.Since(start).Seconds()
	if steps > 0 {
		rep.Loss = sums[0] / float64(steps)
	}
	if tokens > 0 {
		rep.Recon, rep.KL = sums[1]/float64(tokens), sums[2]/float64(tokens)
		rep.TokensSec = float64(tokens) / rep.Seconds
	}
	if labTokens > 0 {
		rep.Class = sums[3] / float64(labTokens)
	}
	return rep, nil
}

// stepResult is what one step computed: the loss (the sum of its batches'
// losses per token), and the summed terms.
type stepResult struct {
	loss, recon, kl, class float64
	tokens, labeled        int
}

// step trains on a labeled batch and, if any, an unlabeled one: their
// losses per token are added, the unlabeled one's weighted by
// w.Unlabeled.
func (m *Model) step(bs []*batch, w Weights, opt *kit.Adam, lr float64, rng *rand.Rand) (stepResult, error) {
	g := kit.NewGraph(m.device)
	defer g.Free()
	var r stepResult
	err := kit.Guard(func() {
		var total *ts.Tensor
		for _, b := range bs {
			l, t := m.batchLoss(g, b, w, rng)
			if total == nil {
				total = l
			} else {
				total = g.T(total.Add(g.T(l.MulScalar(g.Scalar(w.Unlabeled), false)), false))
			}
			r.recon += value(t.recon)
			r.kl += value(t.kl)
			if t.class != nil {
				r.class += value(t.class)
			}
			r.tokens += b.n
			r.labeled += b.labeled
		}
		opt.ZeroGrad(g)
		g.Check(total.Backward())
		opt.Update(g, lr)
		r.loss = value(total)
	})
	return r, err
}

// value reads a scalar tensor; inside Guard.
func value(x *ts.Tensor) float64 { return float64(kit.Float32s(x)[0]) }

// score returns the entity micro F1 of the model's predictions of exs.
func (m *Model) score(exs []example, gold [][]string) (float64, error) {
	preds, err := m.predictExamples(exs, 64)
	if err != nil {
		return 0, err
	}
	rep, err := eval.Evaluate(gold, (&dataset.Predictions{Sentences: preds}).HardTags(), corpus.AnyScheme)
	if err != nil {
		return 0, err
	}
	return rep.Micro.F1, nil
}
