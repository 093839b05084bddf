package vsl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/eval"
	"github.com/nerflow/nerflow/kit"
	"github.com/nerflow/nerflow/train/tagger"
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
	// EncoderLearningRate and EncoderWarmup are the schedule of a
	// fine-tuned encoder's weights (WithEncoder), as the tagger's
	// (tagger.TrainConfig); a rate of 0 keeps the encoder frozen.
	EncoderLearningRate float64 `json:"encoder_learning_rate,omitempty"`
	EncoderWarmup       float64 `json:"encoder_warmup,omitempty"`
}

// DefaultTrainConfig trains for 30 epochs of the labeled sentences (on
// CoNLL-2003's 10%, dev F1 still rose through the 15th).
func DefaultTrainConfig() TrainConfig {
	return TrainConfig{Epochs: 30, BatchSize: 32, LearningRate: 1e-3, Warmup: 0.05, MaxGradNorm: 5,
		KLWeight: 1, KLWarmup: 300, ClassWeight: 10, UnlabeledWeight: 1, Seed: 1,
		EncoderLearningRate: tagger.DefaultTrainConfig().EncoderLearningRate, EncoderWarmup: tagger.DefaultTrainConfig().EncoderWarmup}
}

func (c TrainConfig) validate() error {
	if c.Epochs < 1 || c.BatchSize < 1 || c.LearningRate <= 0 {
		return fmt.Errorf("epochs %d, batch size %d, learning rate %v: all must be positive", c.Epochs, c.BatchSize, c.LearningRate)
	}
	if c.Warmup < 0 || c.Warmup > 1 || c.MaxGradNorm < 0 || c.KLWeight < 0 || c.KLWarmup < 0 || c.ClassWeight < 0 || c.UnlabeledWeight < 0 || c.Patience < 0 {
		return fmt.Errorf("warmup %v, max grad norm %v, kl weight %v, kl warmup %d, class weight %v, patience %d: out of range",
			c.Warmup, c.MaxGradNorm, c.KLWeight, c.KLWarmup, c.ClassWeight, c.Patience)
	}
	if c.EncoderLearningRate < 0 || c.EncoderWarmup < 0 || c.EncoderWarmup > 1 {
		return fmt.Errorf("encoder learning rate %v, encoder warmup %v: out of range", c.EncoderLearningRate, c.EncoderWarmup)
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
type Progress = kit.Progress

// Options of Train.
type Options struct {
	Log      *slog.Logger
	Progress func(Progress)
}

// Train fits m to the labeled sentences (tags in any scheme) and the
// unlabeled ones (tags ignored; may be nil), on kit.Fit. With a dev set,
// every epoch is scored on it (entity micro F1) and the best epoch's
// weights are kept. It computes on an OS thread of its own
// (kit.OnComputeThread) and waits for it.
func Train(ctx context.Context, m *Model, labeled, unlabeled, dev *corpus.Corpus, cfg TrainConfig, o Options) (*Result, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("vsl training: %w", err)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	m.frozenEnc = cfg.EncoderLearningRate == 0
	r := &fitRun{m: m, cfg: cfg, log: o.Log}
	var err error
	if r.lab, err = m.encode(labeled, true); err != nil {
		return nil, fmt.Errorf("labeled set: %w", err)
	}
	var unl []example
	if unlabeled != nil {
		if unl, err = m.encode(unlabeled, false); err != nil {
			return nil, fmt.Errorf("unlabeled set: %w", err)
		}
	}
	if dev != nil {
		if r.dev, err = m.encode(dev, false); err != nil {
			return nil, fmt.Errorf("dev set: %w", err)
		}
		for i, s := range dev.Sentences {
			if len(s.Tags) != len(s.Tokens) {
				return nil, fmt.Errorf("dev set: sentence %d: %d tokens but %d tags", i+1, len(s.Tokens), len(s.Tags))
			}
			r.devGold = append(r.devGold, s.Tags)
		}
	}
	r.stream = &unlabeledStream{exs: unl, size: cfg.BatchSize, seed: cfg.Seed}
	perEpoch, _ := r.StepsPerEpoch()
	if perEpoch == 0 {
		return nil, errors.New("vsl training: the labeled set has no tokens")
	}
	o.Log.Info("training vsl", "variant", m.Config.Variant, "labeled", len(r.lab), "unlabeled", len(unl), "epochs", cfg.Epochs, "steps", perEpoch*cfg.Epochs)
	fr, err := kit.Fit(ctx, r, kit.FitConfig{Epochs: cfg.Epochs, LearningRate: cfg.LearningRate, Warmup: cfg.Warmup,
		MaxGradNorm: cfg.MaxGradNorm, Patience: cfg.Patience}, kit.FitOptions{Log: o.Log, Progress: o.Progress})
	if err != nil {
		return nil, err
	}
	return &Result{Epochs: r.history, BestEpoch: fr.BestEpoch, BestDevF1: fr.BestScore, Steps: fr.Steps}, nil
}

// fitRun is a run of Train as kit.Fit drives it.
type fitRun struct {
	m       *Model
	cfg     TrainConfig
	log     *slog.Logger
	lab     []example
	dev     []example
	devGold [][]string // nil without a dev set
	stream  *unlabeledStream
	history []EpochReport
	// The epoch's batches, dropout stream and sums (StartEpoch).
	batches         [][]int
	rng             *rand.Rand
	rep             EpochReport
	sums            [4]float64 // loss per token summed over steps, recon, kl, class
	tokens, labeled int
}

var (
	_ kit.Evaluator = (*fitRun)(nil)
	_ kit.Grouped   = (*fitRun)(nil)
)

func (r *fitRun) Device() gotch.Device       { return r.m.device }
func (r *fitRun) Weights() []ts.NamedTensor  { return r.m.trained() }
func (r *fitRun) Evaluates() bool            { return r.devGold != nil }
func (r *fitRun) Evaluate() (float64, error) { return r.m.score(r.dev, r.devGold) }

// ParamGroups puts a fine-tuned encoder's weights on a schedule of their
// own.
func (r *fitRun) ParamGroups() []kit.ParamGroup {
	if r.m.enc == nil || r.m.frozenEnc {
		return nil
	}
	names, _ := kit.SplitNamed(tagger.EncoderWeights(r.m.enc))
	return []kit.ParamGroup{{Name: "encoder", Weights: names, LearningRate: r.cfg.EncoderLearningRate, Warmup: r.cfg.EncoderWarmup}}
}

func (r *fitRun) StepsPerEpoch() (int, error) {
	return len(batches(r.lab, r.cfg.BatchSize, rand.New(rand.NewPCG(r.cfg.Seed, 0)))), nil
}

func (r *fitRun) StartEpoch(epoch int) (int, error) {
	r.batches = batches(r.lab, r.cfg.BatchSize, rand.New(rand.NewPCG(r.cfg.Seed, 1000+uint64(epoch))))
	r.rng = rand.New(rand.NewPCG(r.cfg.Seed, 2000+uint64(epoch)))
	r.rep, r.sums, r.tokens, r.labeled = EpochReport{Epoch: epoch}, [4]float64{}, 0, 0
	return len(r.batches), nil
}

// Step pairs the labeled batch with the next unlabeled one, if any.
func (r *fitRun) Step(_ context.Context, s *kit.Step) (kit.StepResult, error) {
	cfg := r.cfg
	w := Weights{KL: KLWeight(cfg.KLWeight, s.Done, cfg.KLWarmup), Class: cfg.ClassWeight, Unlabeled: cfg.UnlabeledWeight}
	ids := r.batches[s.Batch]
	bs := []*batch{newBatch(r.lab, ids)}
	r.rep.Sentences += len(ids)
	if u := r.stream.next(); u != nil {
		bs = append(bs, newBatch(r.stream.exs, u))
		r.rep.Sentences += len(u)
		r.rep.Unlabeled += len(u)
	}
	st, err := r.m.step(bs, w, s, r.rng)
	if err != nil {
		return kit.StepResult{}, err
	}
	r.sums[0] += st.loss
	r.sums[1] += st.recon
	r.sums[2] += st.kl
	r.sums[3] += st.class
	r.tokens += st.tokens
	r.labeled += st.labeled
	r.rep.KLWeight = w.KL
	return kit.StepResult{Loss: st.loss, Tokens: st.tokens}, nil
}

// EndEpoch adds the epoch's report to the history and logs it.
func (r *fitRun) EndEpoch(e kit.EpochStats) error {
	rep := r.rep
	rep.Seconds, rep.DevF1 = e.Seconds, e.Score
	if e.Steps > 0 {
		rep.Loss = r.sums[0] / float64(e.Steps)
	}
	if r.tokens > 0 {
		rep.Recon, rep.KL = r.sums[1]/float64(r.tokens), r.sums[2]/float64(r.tokens)
		rep.TokensSec = float64(r.tokens) / rep.Seconds
	}
	if r.labeled > 0 {
		rep.Class = r.sums[3] / float64(r.labeled)
	}
	r.history = append(r.history, rep)
	r.log.Info("vsl epoch done", "epoch", e.Epoch, "loss", rep.Loss, "recon", rep.Recon, "kl", rep.KL, "class", rep.Class,
		"kl_weight", rep.KLWeight, "dev_f1", rep.DevF1, "seconds", math.Round(rep.Seconds))
	return nil
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
func (m *Model) step(bs []*batch, w Weights, s *kit.Step, rng *rand.Rand) (stepResult, error) {
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
		s.Update(g, total)
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
