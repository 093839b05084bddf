package tagger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/nerflow/nerflow/kit"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/eval"
)

// TrainConfig are the hyperparameters of a training run.
type TrainConfig struct {
	// Loss is a registered loss of the tagger's head: LossCE, LossGCE or
	// LossKL (soft targets, see WithSoftTargets) for the token head,
	// LossCRF for the CRF.
	Loss string `json:"loss"`
	// Q is the exponent of generalized cross entropy.
	Q float64 `json:"q"`
	// UpdateInterval is the number of batches between two noisy-label
	// removal passes (0: no removal). Tau is the probability under which a
	// token's distant label counts as noise.
	UpdateInterval int     `json:"update_interval"`
	Tau            float64 `json:"tau"`
	// DropO is the fraction of O tokens left out of the loss, drawn once
	// per run (distant labels miss many entities, so an O is weak evidence).
	// 1 leaves every O out: with the CRF, a partially annotated corpus
	// (missing entities tagged O) then trains on the marginal likelihood of
	// its entity tags, the other tokens' tags summed over.
	DropO float64 `json:"drop_o"`
	// UnknownAsEntity keeps tokens of the unknown type "?" in the
	// entity-vs-O loss as entities (and, for the CRF, restricts them to
	// entity tags); by default they are ignored by the loss altogether.
	UnknownAsEntity bool `json:"unknown_as_entity"`
	// MissRate is LossPartial's weight of an entity tag on a token the
	// distant labels left O: the chance that the labeler missed an entity
	// there.
	MissRate float64 `json:"miss_rate,omitempty"`
	// Sampling, NegRatio and Mu configure LossNegSample: how negatives
	// are drawn (SamplingUniform or SamplingWeighted), how many per
	// sentence (ceil(NegRatio * length)), and the weighted draw's exponent.
	Sampling string  `json:"sampling,omitempty"`
	NegRatio float64 `json:"neg_ratio,omitempty"`
	Mu       float64 `json:"mu,omitempty"`

	Epochs       int     `json:"epochs"`
	BatchSize    int     `json:"batch_size"`
	LearningRate float64 `json:"learning_rate"`
	// Warmup is the fraction of all steps spent warming the learning rate
	// up linearly; it then decays linearly to 0.
	Warmup      float64 `json:"warmup"`
	MaxGradNorm float64 `json:"max_grad_norm"` // 0: no clipping
	// Patience stops training after that many evaluations on the dev set
	// without a better F1 (0: never; the best evaluation's weights are kept
	// either way when there is a dev set).
	Patience int `json:"patience"`
	// EvalEvery scores the model on the dev set every that many steps, and
	// at the end of each epoch, instead of at the end of each epoch only
	// (0): a run that overfits noisy labels within its first epoch, as
	// BOND's first stage does, stops at the step the dev set chooses.
	EvalEvery int    `json:"eval_every,omitempty"`
	Seed      uint64 `json:"seed"`
}

// DefaultTrainConfig is supervised training with cross entropy.
func DefaultTrainConfig() TrainConfig {
	return TrainConfig{
		Loss: LossCE, Q: 0.7, Tau: 0.7, MissRate: 0.5, Sampling: SamplingUniform, NegRatio: 0.35, Mu: 8,
		Epochs: 10, BatchSize: 32, LearningRate: 1e-3, Warmup: 0.1, MaxGradNorm: 5, Seed: 1,
	}
}

func (c TrainConfig) validate(head string) error {
	var errs []error
	if err := checkLoss(c.Loss, head, c); err != nil {
		errs = append(errs, err)
	}
	if c.UpdateInterval < 0 {
		errs = append(errs, fmt.Errorf("update interval %d", c.UpdateInterval))
	}
	if c.UpdateInterval > 0 && head != TokenHead {
		errs = append(errs, errors.New("noisy-label removal needs the token head"))
	}
	if c.UpdateInterval > 0 && (c.Tau <= 0 || c.Tau >= 1) {
		errs = append(errs, fmt.Errorf("tau %v, want (0, 1)", c.Tau))
	}
	if l, err := lookupLoss(c.Loss); err == nil && l.Soft() && (c.UpdateInterval > 0 || c.DropO > 0) {
		errs = append(errs, fmt.Errorf("noisy-label removal and drop_o apply to hard labels, not to the soft targets of loss %s", c.Loss))
	}
	if c.DropO < 0 || c.DropO > 1 {
		errs = append(errs, fmt.Errorf("drop_o %v, want [0, 1]", c.DropO))
	}
	if c.Epochs < 1 || c.BatchSize < 1 || c.LearningRate <= 0 {
		errs = append(errs, fmt.Errorf("epochs %d, batch size %d, learning rate %v: all must be positive", c.Epochs, c.BatchSize, c.LearningRate))
	}
	if c.Warmup < 0 || c.Warmup > 1 || c.MaxGradNorm < 0 || c.Patience < 0 || c.EvalEvery < 0 {
		errs = append(errs, fmt.Errorf("warmup %v, max grad norm %v, patience %d, eval every %d out of range", c.Warmup, c.MaxGradNorm, c.Patience, c.EvalEvery))
	}
	return errors.Join(errs...)
}

// Progress is a live report of a training run.
type Progress struct {
	Epoch, Epochs int // 1-based
	Step, Steps   int // optimizer steps so far, and in the whole run
	Loss          float64
	TokensPerSec  float64
}

// EpochReport is what one epoch achieved.
type EpochReport struct {
	Epoch        int     `json:"epoch"`
	TrainLoss    float64 `json:"train_loss"` // mean over the epoch's batches
	DevF1        float64 `json:"dev_f1"`     // entity micro F1, when there is a dev set
	TokensPerSec float64 `json:"tokens_per_sec"`
	// Removed counts the tokens whose entity and type losses noisy-label
	// removal switched off at the end of the epoch.
	RemovedEntity int `json:"removed_entity,omitempty"`
	RemovedType   int `json:"removed_type,omitempty"`
	// Negatives counts the spans LossNegSample drew as negatives. With a
	// complete annotation (WithCompleteAnnotation), Missampled counts those
	// of them that are entities there, and Missampling is their share: the
	// missampling rate of Li et al.'s analysis.
	Negatives   int      `json:"negatives,omitempty"`
	Missampled  int      `json:"missampled,omitempty"`
	Missampling *float64 `json:"missampling,omitempty"`
	// RSSBytes is the process's resident memory at the end of the epoch
	// (0 where the system does not tell): flat from the second epoch on in
	// a healthy run.
	RSSBytes int64 `json:"rss_bytes,omitempty"`
}

// Evaluation is one score of the model on the dev set.
type Evaluation struct {
	Epoch int     `json:"epoch"`
	Step  int     `json:"step"` // optimizer steps done
	DevF1 float64 `json:"dev_f1"`
}

// Result summarizes a training run.
type Result struct {
	Epochs    []EpochReport `json:"epochs"`
	BestEpoch int           `json:"best_epoch"` // 0 without a dev set
	// BestStep is the step of the best evaluation, whose weights the
	// model holds (0 without a dev set).
	BestStep  int     `json:"best_step"`
	BestDevF1 float64 `json:"best_dev_f1"`
	Steps     int     `json:"steps"`
	// Evaluations are the scores on the dev set, in order.
	Evaluations []Evaluation `json:"evaluations,omitempty"`
	// Resumed is the number of epochs restored from a checkpoint.
	Resumed int `json:"resumed"`
}

// Trainer fits a Tagger.
type Trainer struct {
	model *Tagger
	cfg   TrainConfig
	loss  Loss // cfg.Loss
	log   *slog.Logger
	// progress, if set, receives a report after every batch.
	progress func(Progress)
	// checkpoint, if set, is called after every epoch with a directory
	// holding everything needed to resume (see Resume).
	checkpoint func(dir string, epoch int) error
	resumeDir  string
	soft       [][][]float32
	// refresh, every refreshEvery steps, recomputes the soft targets from
	// the current model's predictions (self-training).
	refresh      func(probs [][][]float32) ([][][]float32, error)
	refreshEvery int
	// augment, if set, gives each epoch's augmented sentences (WithAugmented).
	augment func(epoch int) ([]corpus.Sentence, error)
	// complete is the training set's complete annotation
	// (WithCompleteAnnotation).
	complete *corpus.Corpus
	// objective, if set, adds its loss on the unlabeled sentences, times
	// unlabeledWeight, to every step (WithUnlabeled).
	unlabeled       *corpus.Corpus
	objective       UnlabeledObjective
	unlabeledWeight float64

	workDir string
	tempDir bool // workDir was made by the trainer, removed after Run
}

// TrainerOption configures a Trainer.
type TrainerOption func(*Trainer)

// WithLogger logs epochs and noisy-label removal to l.
func WithLogger(l *slog.Logger) TrainerOption { return func(t *Trainer) { t.log = l } }

// WithProgress reports every batch to f.
func WithProgress(f func(Progress)) TrainerOption { return func(t *Trainer) { t.progress = f } }

// WithCheckpoints calls save after every epoch with a directory holding the
// run's state (weights, optimizer moments, noisy-label weights, history);
// save must copy what it keeps before returning. workDir is where the
// trainer writes it.
func WithCheckpoints(workDir string, save func(dir string, epoch int) error) TrainerOption {
	return func(t *Trainer) { t.workDir, t.checkpoint = workDir, save }
}

// Resume continues the run from a directory a checkpoint callback was
// given (or a copy of it), if it holds a state; an empty or missing
// directory starts afresh.
func Resume(dir string) TrainerOption { return func(t *Trainer) { t.resumeDir = dir } }

// WithSoftTargets gives the soft targets of LossKL, aligned with the
// training sentences: soft[i][t] holds p(O) of token t of sentence i, then
// the weights of the entity tags in Labels order (renormalized by the loss;
// all 0 leaves the token out of the type loss); a nil row leaves the token
// out of the loss altogether (a self-training teacher not confident
// enough). The sentences' tags are not used and may be absent.
func WithSoftTargets(soft [][][]float32) TrainerOption { return func(t *Trainer) { t.soft = soft } }

// WithSoftRefresh makes the soft targets follow the model being trained,
// as RoSTER's self-training does: every `every` steps, the model (without
// dropout) predicts the training sentences, and refresh turns its per-token
// distributions over the tag set (Tagger.Predict's Probs) into the targets
// of the next steps, in the layout of WithSoftTargets, which gives the
// targets of the first steps.
func WithSoftRefresh(every int, refresh func(probs [][][]float32) ([][][]float32, error)) TrainerOption {
	return func(t *Trainer) { t.refreshEvery, t.refresh = every, refresh }
}

// WithCompleteAnnotation gives the complete annotation of the training
// sentences (the gold before entities were masked, or the true labels of
// distant ones), sentence by sentence: every epoch then reports the
// missampling rate of LossNegSample, the share of its drawn negatives that
// are entities there. Training never reads it otherwise.
func WithCompleteAnnotation(c *corpus.Corpus) TrainerOption {
	return func(t *Trainer) { t.complete = c }
}

// NewTrainer prepares a run of model with cfg.
func NewTrainer(model *Tagger, cfg TrainConfig, opts ...TrainerOption) (*Trainer, error) {
	if err := cfg.validate(model.Config.Head); err != nil {
		return nil, fmt.Errorf("training config: %w", err)
	}
	loss, _ := lookupLoss(cfg.Loss) // checked by validate
	t := &Trainer{model: model, cfg: cfg, loss: loss, log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(t)
	}
	if loss.Soft() != (t.soft != nil) {
		return nil, fmt.Errorf("training config: loss %q with soft targets: %v (a soft loss needs them, the others do not use them)", cfg.Loss, t.soft != nil)
	}
	if t.augment != nil && cfg.Loss != LossKL {
		return nil, fmt.Errorf("training config: augmented sentences need loss %s, not %s", LossKL, cfg.Loss)
	}
	if err := t.checkUnlabeled(); err != nil {
		return nil, err
	}
	if t.refresh != nil && (t.soft == nil || t.refreshEvery < 1) {
		return nil, fmt.Errorf("training config: refreshing soft targets every %d steps needs soft targets to start from and an interval of at least 1", t.refreshEvery)
	}
	return t, nil
}

// Random streams of a run, each its own PCG sequence of the seed, so that
// each depends on the seed alone (and an epoch's on the epoch alone: a run
// resumed at an epoch boundary draws what the uninterrupted run would).
const (
	streamDropO   = 1
	streamBatches = 1000 // + epoch
	streamDropout = 2000 // + epoch
	streamSample  = 3000 // + epoch
)

func (t *Trainer) rng(stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(t.cfg.Seed, stream))
}

// runState is what a checkpoint records besides weights and moments.
type runState struct {
	Epoch      int           `json:"epoch"` // epochs finished
	Step       int           `json:"step"`
	History    []EpochReport `json:"history"`
	BestEpoch  int           `json:"best_epoch"`
	BestStep   int           `json:"best_step"`
	BestDevF1  float64       `json:"best_dev_f1"`
	SinceBest  int           `json:"since_best"` // evaluations
	Evals      []Evaluation  `json:"evaluations,omitempty"`
	KeepEntity []byte        `json:"keep_entity,omitempty"` // noisy-label weights, token by token
	KeepType   []byte        `json:"keep_type,omitempty"`
}

const (
	stateFile     = "state.json"
	optimizerFile = "optimizer.pt"
	bestFile      = "best.pt"
)

// Run trains on trainSet, whose sentences must all carry tags (any scheme;
// they are converted to the tagger's, and tags of corpus.UnknownType count
// as entities of unknown type). With a non-nil dev set, every epoch is
// scored on it (entity micro F1), the best epoch's weights are kept, and
// Patience applies (with EvalEvery, also within epochs). Run computes on
// an OS thread of its own (see onComputeThread) and waits for it.
func (t *Trainer) Run(ctx context.Context, trainSet, dev *corpus.Corpus) (res *Result, err error) {
	kit.OnComputeThread(func(refreshThreads func()) {
		res, err = t.run(ctx, trainSet, dev, refreshThreads)
	})
	return res, err
}

// run is Run on the computing thread. The steps: a place for the run's
// state, the data encoded once, the optimizer (restored from a checkpoint
// when resuming), the learning-rate schedule, the epochs, and the best
// epoch's weights put back.
func (t *Trainer) run(ctx context.Context, trainSet, dev *corpus.Corpus, refreshThreads func()) (*Result, error) {
	if err := t.makeWorkDir(); err != nil {
		return nil, err
	}
	defer t.removeTempDir()

	d, err := t.prepareData(trainSet, dev)
	if err != nil {
		return nil, err
	}
	opt, err := newAdam(t.model, t.cfg.MaxGradNorm)
	if err != nil {
		return nil, err
	}
	defer opt.Close()
	if d.unlabeled, err = t.startUnlabeled(); err != nil {
		return nil, err
	}
	defer d.unlabeled.close()
	st, res, err := t.startState(opt, d.weights)
	if err != nil {
		return nil, err
	}
	sched, err := t.newSchedule(d.train)
	if err != nil {
		return nil, err
	}
	t.log.Info("training", "examples", len(d.train), "epochs", t.cfg.Epochs, "first_epoch", st.Epoch+1, "allocator", kit.AllocatorName())
	for epoch := st.Epoch + 1; t.continues(epoch, &st, dev != nil); epoch++ {
		refreshThreads()
		if err := t.trainEpoch(ctx, epoch, d, opt, &st, sched); err != nil {
			return nil, err
		}
	}
	if t.stopped(&st, dev != nil) {
		t.log.Info("early stop", "epoch", st.Epoch, "step", st.Step, "best_step", st.BestStep, "best_dev_f1", st.BestDevF1)
	}
	if err := t.restoreBest(&st, dev != nil); err != nil {
		return nil, err
	}
	res.Epochs, res.BestEpoch, res.BestStep, res.BestDevF1, res.Steps = st.History, st.BestEpoch, st.BestStep, st.BestDevF1, st.Step
	res.Evaluations = st.Evals
	return res, nil
}

// makeWorkDir gives the best epoch's weights a place even without
// checkpoints: a temporary directory, removed by removeTempDir.
func (t *Trainer) makeWorkDir() error {
	if t.stateDir() != "" {
		return nil
	}
	dir, err := os.MkdirTemp("", "nerflow-train-")
	if err != nil {
		return fmt.Errorf("training: %w", err)
	}
	t.workDir, t.tempDir = dir, true
	return nil
}

func (t *Trainer) removeTempDir() {
	if t.tempDir {
		os.RemoveAll(t.workDir)
		t.workDir, t.tempDir = "", false
	}
}

// runData is the run's data, encoded once.
type runData struct {
	train   []example
	dev     []example
	devGold [][]string // nil without a dev set
	weights *noiseWeights
	// unlabeled is the unlabeled objective's state (WithUnlabeled), nil
	// without one.
	unlabeled *unlabeledRun
}

// prepareData encodes the training and dev sets, attaches soft targets,
// and applies the noise handling decided once per run: unknown-type tokens
// ignored (unless UnknownAsEntity), O tokens dropped (DropO), and the
// weights that noisy-label removal switches off.
func (t *Trainer) prepareData(trainSet, dev *corpus.Corpus) (*runData, error) {
	m, cfg := t.model, t.cfg
	exs, err := m.encodeCorpus(trainSet, t.soft == nil)
	if err != nil {
		return nil, fmt.Errorf("training set: %w", err)
	}
	if t.soft != nil {
		if err := attachSoft(exs, t.soft, m.Labels.NumTags()); err != nil {
			return nil, fmt.Errorf("soft targets: %w", err)
		}
	}
	d := &runData{train: exs}
	if dev != nil {
		if d.dev, err = m.encodeCorpus(dev, false); err != nil {
			return nil, fmt.Errorf("dev set: %w", err)
		}
		for i, s := range dev.Sentences {
			if len(s.Tags) != len(s.Tokens) {
				return nil, fmt.Errorf("dev set: sentence %d: %d tokens but %d tags", i+1, len(s.Tokens), len(s.Tags))
			}
			d.devGold = append(d.devGold, s.Tags)
		}
	}
	if t.complete != nil {
		if err := attachComplete(exs, t.complete); err != nil {
			return nil, fmt.Errorf("complete annotation: %w", err)
		}
	}
	if !cfg.UnknownAsEntity {
		ignoreUnknown(exs)
	}
	dropOutside(exs, cfg.DropO, t.rng(streamDropO))
	d.weights = newNoiseWeights(exs, cfg.UpdateInterval > 0)
	return d, nil
}

// startState is the state of a fresh run, or the one restored from the
// checkpoint to resume from.
func (t *Trainer) startState(opt *kit.Adam, weights *noiseWeights) (runState, *Result, error) {
	st, res := runState{}, &Result{}
	if t.resumeDir == "" {
		return st, res, nil
	}
	ok, err := t.restore(opt, &st, weights)
	if err != nil {
		return st, nil, fmt.Errorf("resuming: %w", err)
	}
	if ok {
		res.Resumed = st.Epoch
		t.log.Info("resumed training", "epochs_done", st.Epoch, "step", st.Step)
	}
	return st, res, nil
}

// schedule is the learning rate's: linear warm-up, then linear decay to 0.
type schedule struct {
	totalSteps, warmup int
	peak               float64
}

func (s schedule) at(step int) float64 { return kit.LearningRate(s.peak, step, s.warmup, s.totalSteps) }

func (t *Trainer) newSchedule(exs []example) (schedule, error) {
	batchesPerEpoch := len(bucketBatches(exs, t.cfg.BatchSize, t.rng(streamBatches)))
	if batchesPerEpoch == 0 {
		return schedule{}, errors.New("training set has no tokens")
	}
	total := batchesPerEpoch * t.cfg.Epochs
	return schedule{totalSteps: total, warmup: int(math.Round(t.cfg.Warmup * float64(total))), peak: t.cfg.LearningRate}, nil
}

// continues says whether to run epoch: within Epochs, and not stopped
// early.
func (t *Trainer) continues(epoch int, st *runState, hasDev bool) bool {
	return epoch <= t.cfg.Epochs && !t.stopped(st, hasDev)
}

// stopped says whether Patience evaluations on the dev set went by without
// a better F1.
func (t *Trainer) stopped(st *runState, hasDev bool) bool {
	return hasDev && t.cfg.Patience > 0 && st.SinceBest >= t.cfg.Patience
}

// trainEpoch runs one epoch, scores it on the dev set (keeping the best
// weights), logs it and writes a checkpoint.
func (t *Trainer) trainEpoch(ctx context.Context, epoch int, d *runData, opt *kit.Adam, st *runState, sched schedule) error {
	rep, err := t.epoch(ctx, epoch, d, opt, st, sched)
	if err != nil {
		return err
	}
	if d.devGold != nil {
		// The epoch's score: its last step's, evaluated now unless EvalEvery
		// just did.
		if n := len(st.Evals); n == 0 || st.Evals[n-1].Step != st.Step {
			if err := t.evaluate(epoch, d, st); err != nil {
				return err
			}
		}
		rep.DevF1 = st.Evals[len(st.Evals)-1].DevF1
	}
	st.Epoch = epoch
	st.History = append(st.History, rep)
	attrs := []any{"epoch", epoch, "loss", rep.TrainLoss, "dev_f1", rep.DevF1, "tokens_per_sec", math.Round(rep.TokensPerSec),
		"removed_entity", rep.RemovedEntity, "removed_type", rep.RemovedType, "rss_mb", rep.RSSBytes >> 20}
	if rep.Missampling != nil {
		attrs = append(attrs, "negatives", rep.Negatives, "missampling", *rep.Missampling)
	}
	t.log.Info("epoch done", attrs...)
	return t.saveCheckpoint(opt, st, d.weights)
}

// evaluate scores the model on the dev set and keeps its weights if they
// are the best so far.
func (t *Trainer) evaluate(epoch int, d *runData, st *runState) error {
	f1, err := t.score(d.dev, d.devGold)
	if err != nil {
		return fmt.Errorf("epoch %d, step %d: dev set: %w", epoch, st.Step, err)
	}
	st.Evals = append(st.Evals, Evaluation{Epoch: epoch, Step: st.Step, DevF1: f1})
	if t.cfg.EvalEvery > 0 {
		t.log.Info("dev score", "epoch", epoch, "step", st.Step, "dev_f1", f1, "best_dev_f1", max(f1, st.BestDevF1))
	}
	if st.BestEpoch == 0 || f1 > st.BestDevF1 {
		st.BestEpoch, st.BestStep, st.BestDevF1, st.SinceBest = epoch, st.Step, f1, 0
		return t.saveBest()
	}
	st.SinceBest++
	return nil
}

// restoreBest puts the best evaluation's weights back when later steps
// ended the run.
func (t *Trainer) restoreBest(st *runState, hasDev bool) error {
	// A checkpoint written before BestStep existed has 0 there: its best
	// weights are loaded, which is right in any case.
	if !hasDev || st.BestEpoch == 0 || st.BestStep == st.Step {
		return nil
	}
	if err := t.model.loadWeights(filepath.Join(t.stateDir(), bestFile)); err != nil {
		return fmt.Errorf("restoring the best epoch's weights: %w", err)
	}
	return nil
}

// epoch runs one pass over the training set, cut short when scores on the
// dev set every EvalEvery steps stop it.
func (t *Trainer) epoch(ctx context.Context, epoch int, d *runData, opt *kit.Adam, st *runState, sched schedule) (EpochReport, error) {
	cfg, exs, weights := t.cfg, d.train, d.weights
	u := d.unlabeled
	batches := bucketBatches(exs, cfg.BatchSize, t.rng(streamBatches+uint64(epoch)))
	dropout := t.rng(streamDropout + uint64(epoch))
	var unlabeled [][]int
	noise := t.rng(streamUnlabeled + uint64(epoch))
	if u != nil {
		unlabeled = u.epochBatches(len(batches), cfg.BatchSize, noise)
	}
	rep := EpochReport{Epoch: epoch}
	var aug []example
	if t.augment != nil {
		var err error
		if aug, err = t.augmentedExamples(epoch, exs); err != nil {
			return rep, fmt.Errorf("epoch %d: %w", epoch, err)
		}
	}
	sampled := &sampling{epoch: epoch, epochs: cfg.Epochs, rng: t.rng(streamSample + uint64(epoch))}
	start := time.Now()
	var tokens, losses int
	var lossSum float64
	for i, ids := range batches {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		if cfg.UpdateInterval > 0 && (st.Step+1)%cfg.UpdateInterval == 0 {
			if err := t.removeNoisyLabels(exs, weights); err != nil {
				return rep, fmt.Errorf("epoch %d: noisy-label removal: %w", epoch, err)
			}
		}
		if t.refresh != nil && st.Step > 0 && st.Step%t.refreshEvery == 0 {
			if err := t.refreshSoft(exs); err != nil {
				return rep, fmt.Errorf("epoch %d, step %d: refreshing soft targets: %w", epoch, st.Step+1, err)
			}
		}
		b := newBatch(exs, ids)
		var ab *batch
		if aug != nil {
			withTargetsOf(aug, exs, ids)
			ab = newBatch(aug, ids)
		}
		us := unlabeledStep{run: u, noise: noise}
		if unlabeled != nil {
			us.ids = unlabeled[i]
		}
		lossVal, learned, err := t.step(b, ab, exs, aug, weights.of(), us, opt, sched.at(st.Step), dropout, sampled)
		if err != nil {
			return rep, fmt.Errorf("epoch %d, step %d: %w", epoch, st.Step+1, err)
		}
		if math.IsNaN(lossVal) || math.IsInf(lossVal, 0) {
			return rep, fmt.Errorf("epoch %d, step %d: the loss diverged (%v)", epoch, st.Step+1, lossVal)
		}
		st.Step++
		tokens += b.n
		if learned {
			lossSum += lossVal
			losses++
		}
		if t.progress != nil {
			t.progress(Progress{Epoch: epoch, Epochs: cfg.Epochs, Step: st.Step, Steps: sched.totalSteps, Loss: lossVal,
				TokensPerSec: float64(tokens) / time.Since(start).Seconds()})
		}
		if cfg.EvalEvery > 0 && d.devGold != nil && st.Step%cfg.EvalEvery == 0 {
			if err := t.evaluate(epoch, d, st); err != nil {
				return rep, err
			}
			if t.stopped(st, true) {
				break
			}
		}
	}
	if losses > 0 {
		rep.TrainLoss = lossSum / float64(losses)
	}
	rep.TokensPerSec = float64(tokens) / time.Since(start).Seconds()
	rep.RemovedEntity, rep.RemovedType = weights.removed()
	rep.Negatives, rep.Missampled = sampled.negatives, sampled.missampled
	if t.complete != nil && sampled.negatives > 0 {
		rate := float64(sampled.missampled) / float64(sampled.negatives)
		rep.Missampling = &rate
	}
	rep.RSSBytes = kit.ResidentBytes()
	return rep, nil
}

// step trains on one batch: forward, loss, backward, update. learned is
// false when the batch had nothing to learn from. ab, if not nil, is the
// batch's augmented copy, drawn from aug (WithAugmented); u holds the
// step's unlabeled sentences, if any (WithUnlabeled).
func (t *Trainer) step(b, ab *batch, exs, aug []example, weights []tokenWeights, u unlabeledStep, opt *kit.Adam, lr float64, dropout *rand.Rand, sampled *sampling) (loss float64, learned bool, err error) {
	m := t.model
	g := kit.NewGraph(m.device)
	defer g.Free()
	err = kit.Guard(func() {
		lb := &lossBatch{g: g, head: m.head, h: m.forward(g, b, true, dropout), b: b, exs: exs, weights: weights, k: m.Labels.NumTags(), cfg: t.cfg, sampling: sampled}
		l := t.loss.compute(lb)
		if ab != nil {
			l = addLosses(g, l, augmentedLoss(&lossBatch{g: g, head: m.head, h: m.forward(g, ab, true, dropout), b: ab, exs: aug, k: m.Labels.NumTags(), cfg: t.cfg}, lb))
		}
		if u.ids != nil {
			l = addLosses(g, l, t.unlabeledLoss(g, u.run, u.ids, dropout, u.noise))
		}
		if l == nil {
			return // every token ignored or removed
		}
		opt.ZeroGrad(g)
		if u.ids != nil && u.run.opt != nil {
			u.run.opt.ZeroGrad(g)
		}
		g.Check(l.Backward())
		opt.Update(g, lr)
		if u.ids != nil && u.run.opt != nil {
			u.run.opt.Update(g, lr)
		}
		loss, learned = kit.Item(l), true
	})
	return loss, learned, err
}

// score returns the entity micro F1 of the tagger on encoded examples with
// gold tags (in any scheme).
func (t *Trainer) score(exs []example, gold [][]string) (float64, error) {
	preds, err := t.model.predictExamples(exs, 64)
	if err != nil {
		return 0, err
	}
	pred := make([][]string, len(preds))
	for i, p := range preds {
		pred[i] = p.Tags
	}
	rep, err := eval.Evaluate(gold, pred, corpus.AnyScheme)
	if err != nil {
		return 0, err
	}
	return rep.Micro.F1, nil
}

// refreshSoft replaces the soft targets of exs by those refresh derives
// from the model's current predictions.
func (t *Trainer) refreshSoft(exs []example) error {
	preds, err := t.model.predictExamples(exs, 64)
	if err != nil {
		return err
	}
	probs := make([][][]float32, len(preds))
	for i, p := range preds {
		probs[i] = p.Probs
	}
	soft, err := t.refresh(probs)
	if err != nil {
		return err
	}
	return attachSoft(exs, soft, t.model.Labels.NumTags())
}

// attachSoft checks soft targets against the examples and gives each
// example its own, with all-O hard targets (unused by LossKL).
func attachSoft(exs []example, soft [][][]float32, k int) error {
	if len(soft) != len(exs) {
		return fmt.Errorf("%d sentences of soft targets for %d training sentences", len(soft), len(exs))
	}
	for i := range exs {
		if len(soft[i]) != exs[i].len() {
			return fmt.Errorf("sentence %d: %d tokens but %d soft targets", i+1, exs[i].len(), len(soft[i]))
		}
		for t, s := range soft[i] {
			if s == nil {
				continue // left out of the loss
			}
			if len(s) != k {
				return fmt.Errorf("sentence %d, token %d: %d values for %d tags", i+1, t+1, len(s), k)
			}
			for _, x := range s {
				if x < 0 || x > 1 || x != x {
					return fmt.Errorf("sentence %d, token %d: value %v outside [0, 1]", i+1, t+1, x)
				}
			}
		}
		exs[i].soft = soft[i]
		exs[i].targets = make([]int32, exs[i].len())
	}
	return nil
}

// attachComplete gives each example its entities in the complete
// annotation c, which must have the training set's sentences and lengths.
func attachComplete(exs []example, c *corpus.Corpus) error {
	if len(c.Sentences) != len(exs) {
		return fmt.Errorf("%d sentences for %d training sentences", len(c.Sentences), len(exs))
	}
	for i, s := range c.Sentences {
		if len(s.Tags) != exs[i].len() {
			return fmt.Errorf("sentence %d: %d tags for %d tokens", i+1, len(s.Tags), exs[i].len())
		}
		spans, err := corpus.AnyScheme.Spans(s.Tags)
		if err != nil {
			return fmt.Errorf("sentence %d: %w", i+1, err)
		}
		exs[i].complete = spans
	}
	return nil
}

// ignoreUnknown marks the tokens of entities of unknown type as ignored.
func ignoreUnknown(exs []example) {
	for i := range exs {
		for t, y := range exs[i].targets {
			if y == anyEntity {
				exs[i].targets[t] = ignored
			}
		}
	}
}

// dropOutside marks each O token as ignored with probability p, as RoSTER
// does once before training on distant labels.
func dropOutside(exs []example, p float64, rng *rand.Rand) {
	if p == 0 {
		return
	}
	for i := range exs {
		for t, y := range exs[i].targets {
			if y == 0 && rng.Float64() < p {
				exs[i].targets[t] = ignored
			}
		}
	}
}

// stateDir is where the trainer keeps its state files.
func (t *Trainer) stateDir() string {
	if t.workDir != "" {
		return t.workDir
	}
	return t.resumeDir
}

func (t *Trainer) saveBest() error {
	if err := os.MkdirAll(t.stateDir(), 0o755); err != nil {
		return err
	}
	return t.model.saveWeights(filepath.Join(t.stateDir(), bestFile))
}

// saveCheckpoint writes the run's state and hands it to the checkpoint
// callback.
func (t *Trainer) saveCheckpoint(opt *kit.Adam, st *runState, weights *noiseWeights) error {
	if t.checkpoint == nil {
		return nil
	}
	dir := t.stateDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	// Only what restore reads: the weights, not the whole tagger. The
	// frozen pretrained table (the bulk of a saved tagger, ~140 MB with the
	// full wink vectors) never changes in training and comes back from the
	// embeddings input on resume, so it is not re-uploaded every epoch.
	if err := t.model.saveWeights(filepath.Join(dir, WeightsFile)); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := kit.SaveTensors(opt.State(), filepath.Join(dir, optimizerFile)); err != nil {
		return fmt.Errorf("checkpoint: optimizer: %w", err)
	}
	st.KeepEntity, st.KeepType = weights.pack()
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, stateFile), b, 0o644); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := t.checkpoint(dir, st.Epoch); err != nil {
		return fmt.Errorf("checkpoint after epoch %d: %w", st.Epoch, err)
	}
	return nil
}

// restore loads a checkpoint's state; false when resumeDir holds none.
func (t *Trainer) restore(opt *kit.Adam, st *runState, weights *noiseWeights) (bool, error) {
	b, err := os.ReadFile(filepath.Join(t.resumeDir, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(b, st); err != nil {
		return false, fmt.Errorf("%s: %w", stateFile, err)
	}
	if err := t.model.loadWeights(filepath.Join(t.resumeDir, WeightsFile)); err != nil {
		return false, err
	}
	moments, err := kit.LoadTensors(filepath.Join(t.resumeDir, optimizerFile), t.model.device)
	if err != nil {
		return false, fmt.Errorf("%s: %w", optimizerFile, err)
	}
	defer kit.DropTensors(moments)
	if err := opt.Restore(moments, st.Step); err != nil {
		return false, fmt.Errorf("%s: %w", optimizerFile, err)
	}
	if err := weights.unpack(st.KeepEntity, st.KeepType); err != nil {
		return false, fmt.Errorf("%s: %w", stateFile, err)
	}
	switch best := filepath.Join(t.resumeDir, bestFile); {
	case t.workDir == "":
		t.workDir = t.resumeDir
	case t.workDir != t.resumeDir && st.BestEpoch > 0:
		if err := os.MkdirAll(t.workDir, 0o755); err != nil {
			return false, err
		}
		if err := copyFile(best, filepath.Join(t.workDir, bestFile)); err != nil {
			return false, fmt.Errorf("best epoch's weights: %w", err)
		}
	}
	return true, nil
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}
