package tagger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/eval"
	"github.com/nerflow/nerflow/kit"
	"github.com/nerflow/nerflow/stages"
)

// TrainConfig are the hyperparameters of a training run: those every
// run shares, and the values of its loss's own (LossParams).
type TrainConfig struct {
	// Loss is a registered loss of the tagger's head: LossCE, LossGCE or
	// LossKL (soft targets, see WithSoftTargets) for the token head,
	// LossCRF or LossPartial for the CRF, LossNegSample for the span head.
	Loss string `json:"loss"`
	// LossParams are values of the loss's own hyperparameters
	// (ConfigurableLoss.Params) by name, such as gce's "q" or partial's
	// "miss_rate"; a parameter not there takes its declared default. The
	// trainer hands the loss its own values alone and leaves those of other
	// losses' parameters unread. In JSON they sit beside the other fields,
	// under their names. Set them with SetLossParam, which copies the map:
	// a TrainConfig copied by value keeps its own values.
	LossParams map[string]any `json:"-"`
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

	Epochs       int     `json:"epochs"`
	BatchSize    int     `json:"batch_size"`
	LearningRate float64 `json:"learning_rate"`
	// Warmup is the fraction of all steps spent warming the learning rate
	// up linearly; it then decays linearly to 0.
	Warmup      float64 `json:"warmup"`
	MaxGradNorm float64 `json:"max_grad_norm"` // 0: no clipping
	// EncoderLearningRate is the peak learning rate of a fine-tuned
	// encoder's weights (Config.EncoderPlacement), lower than the tagger's:
	// they start trained, the head does not. 0 keeps them frozen.
	// EncoderWarmup is its schedule's warm-up fraction; it then decays
	// linearly to 0 with the tagger's.
	EncoderLearningRate float64 `json:"encoder_learning_rate,omitempty"`
	EncoderWarmup       float64 `json:"encoder_warmup,omitempty"`
	// Patience stops training after that many evaluations on the dev set
	// without a better F1 (0: never; the best evaluation's weights are kept
	// either way when there is a dev set).
	Patience int `json:"patience"`
	// EvalEvery scores the model on the dev set every that many steps, and
	// at the end of each epoch, instead of at the end of each epoch only
	// (0): a run that overfits noisy labels within its first epoch, as
	// BOND's first stage does, stops at the step the dev set chooses.
	// EvalAuto (-1) derives it from the steps of an epoch (AutoEvalEvery).
	EvalEvery int `json:"eval_every,omitempty"`
	// MinSteps raises Epochs to as many as train at least that many
	// steps, and holds Patience back until then: a small corpus has few
	// steps an epoch, and a model learned from scratch needs a number of
	// steps, not of epochs, before the dev set can tell its best step (0:
	// Epochs as given).
	MinSteps int    `json:"min_steps,omitempty"`
	Seed     uint64 `json:"seed"`
}

// Step intervals derived from the size of an epoch.
const (
	// EvalAuto, as TrainConfig.EvalEvery, scores the dev set every
	// AutoEvalEvery steps.
	EvalAuto = -1
	// AutoEvalsPerEpoch and AutoEvalMinSteps make EvalAuto's interval:
	// BOND's first stage was tuned on CoNLL-2003 at a score every 50
	// steps, an eighth of its 439 steps an epoch; on a small corpus an
	// eighth of an epoch is a few steps, whose scores differ by the dev
	// set's noise more than by what the model learned, and an early stop
	// after Patience of them comes before the model has learned anything,
	// so the interval is never shorter than those 50 steps.
	AutoEvalsPerEpoch = 8
	AutoEvalMinSteps  = 50
)

// AutoInterval is an interval of about 1/per of an epoch of stepsPerEpoch
// steps, ceil(stepsPerEpoch / per), and at least minimum steps.
func AutoInterval(stepsPerEpoch, per, minimum int) int {
	return max((stepsPerEpoch+per-1)/per, minimum, 1)
}

// AutoEvalEvery is EvalAuto's interval for an epoch of stepsPerEpoch
// steps: AutoEvalsPerEpoch scores an epoch, at least AutoEvalMinSteps
// steps apart.
func AutoEvalEvery(stepsPerEpoch int) int {
	return AutoInterval(stepsPerEpoch, AutoEvalsPerEpoch, AutoEvalMinSteps)
}

// StepsPerEpoch is the number of steps of an epoch of the trainer on c in
// batches of batchSize: its non-empty sentences, batchSize at a time.
func StepsPerEpoch(c *corpus.Corpus, batchSize int) int {
	n := 0
	for _, s := range c.Sentences {
		if len(s.Tokens) > 0 {
			n++
		}
	}
	return (n + batchSize - 1) / max(batchSize, 1)
}

// withSteps resolves the settings that depend on the steps of an epoch:
// EvalAuto, and Epochs raised to MinSteps.
func (c TrainConfig) withSteps(stepsPerEpoch int) TrainConfig {
	if c.EvalEvery == EvalAuto {
		c.EvalEvery = AutoEvalEvery(stepsPerEpoch)
	}
	if c.MinSteps > 0 && stepsPerEpoch > 0 {
		c.Epochs = max(c.Epochs, (c.MinSteps+stepsPerEpoch-1)/stepsPerEpoch)
	}
	return c
}

// DefaultTrainConfig is supervised training with cross entropy.
func DefaultTrainConfig() TrainConfig {
	return TrainConfig{Loss: LossCE, Epochs: 10, BatchSize: 32, LearningRate: 1e-3, Warmup: 0.1, MaxGradNorm: 5, Seed: 1,
		EncoderLearningRate: 1e-4, EncoderWarmup: 0.1}
}

// SetLossParam sets the value of a loss's hyperparameter name (checked
// when a trainer is made), in a copy of c.LossParams.
func (c *TrainConfig) SetLossParam(name string, v any) {
	m := maps.Clone(c.LossParams)
	if m == nil {
		m = map[string]any{}
	}
	m[name] = v
	c.LossParams = m
}

// trainConfigJSON is TrainConfig's fields but LossParams, for its JSON.
type trainConfigJSON TrainConfig

// MarshalJSON writes the loss's own hyperparameters beside the other
// fields, under their names, with their defaults filled in (as given when
// they do not resolve): a report's run then reads as the stage's
// parameters do.
func (c TrainConfig) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(trainConfigJSON(c))
	if err != nil {
		return nil, err
	}
	params := c.LossParams
	if l, err := lookupLoss(c.Loss); err == nil {
		if p, err := ownParams(l, c); err == nil {
			params = p.Map()
		}
	}
	if len(params) == 0 {
		return b, nil
	}
	var extra bytes.Buffer
	for _, name := range slices.Sorted(maps.Keys(params)) {
		v, err := json.Marshal(params[name])
		if err != nil {
			return nil, fmt.Errorf("loss parameter %s: %w", name, err)
		}
		k, _ := json.Marshal(name)
		extra.WriteByte(',')
		extra.Write(k)
		extra.WriteByte(':')
		extra.Write(v)
	}
	// b is an object with at least the field loss: the parameters go
	// before its closing brace.
	return append(append(b[:len(b)-1:len(b)-1], extra.Bytes()...), '}'), nil
}

// UnmarshalJSON reads what MarshalJSON writes, and the runs written before
// the losses owned their hyperparameters, which held every loss's
// parameters as fields: the values of the loss's own parameters (of every
// registered loss's, when the loss is not registered) go to LossParams,
// the rest, never read by the run, are dropped.
func (c *TrainConfig) UnmarshalJSON(b []byte) error {
	var shared trainConfigJSON
	if err := json.Unmarshal(b, &shared); err != nil {
		return err
	}
	var all map[string]any
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	*c = TrainConfig(shared)
	c.LossParams = nil
	wanted := lossParamDecls()
	if l, err := lookupLoss(c.Loss); err == nil {
		wanted = map[string]stages.Param{}
		for _, p := range paramsOf(l) {
			wanted[p.Name] = p
		}
	}
	for name, v := range all {
		p, ok := wanted[name]
		if !ok {
			continue
		}
		if canonical, err := p.Convert(v); err == nil {
			v = canonical // else as written, for validate to refuse
		}
		c.SetLossParam(name, v)
	}
	return nil
}

func (c TrainConfig) validate(head string) error {
	var errs []error
	if _, err := configureLoss(c, head); err != nil {
		errs = append(errs, err)
	}
	if l, err := lookupLoss(c.Loss); err == nil && l.Soft() && c.DropO > 0 {
		errs = append(errs, fmt.Errorf("drop_o applies to hard labels, not to the soft targets of loss %s", c.Loss))
	}
	if c.DropO < 0 || c.DropO > 1 {
		errs = append(errs, fmt.Errorf("drop_o %v, want [0, 1]", c.DropO))
	}
	if c.Epochs < 1 || c.BatchSize < 1 || c.LearningRate <= 0 {
		errs = append(errs, fmt.Errorf("epochs %d, batch size %d, learning rate %v: all must be positive", c.Epochs, c.BatchSize, c.LearningRate))
	}
	if c.Warmup < 0 || c.Warmup > 1 || c.MaxGradNorm < 0 || c.Patience < 0 || c.EvalEvery < EvalAuto || c.MinSteps < 0 {
		errs = append(errs, fmt.Errorf("warmup %v, max grad norm %v, patience %d, eval every %d, min steps %d out of range", c.Warmup, c.MaxGradNorm, c.Patience, c.EvalEvery, c.MinSteps))
	}
	if c.EncoderLearningRate < 0 || c.EncoderWarmup < 0 || c.EncoderWarmup > 1 {
		errs = append(errs, fmt.Errorf("encoder learning rate %v, encoder warmup %v out of range", c.EncoderLearningRate, c.EncoderWarmup))
	}
	return errors.Join(errs...)
}

// Progress is a live report of a training run, after every step.
type Progress = kit.Progress

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

// Evaluation is one score of the model on the dev set (its Score is the
// entity micro F1).
type Evaluation = kit.Evaluation

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
	// MaxEpochs and EvalEvery are the run's, once derived from the steps
	// of an epoch (TrainConfig.MinSteps, EvalAuto).
	MaxEpochs int `json:"max_epochs"`
	EvalEvery int `json:"eval_every,omitempty"`
}

// Trainer fits a Tagger.
type Trainer struct {
	model *Tagger
	cfg   TrainConfig
	loss  Loss // cfg.Loss, set to its own hyperparameters
	// removal is the loss's noisy-label removal (off for most).
	removal noisyLabelRemoval
	log     *slog.Logger
	// fit holds the loop's progress, checkpoint and resume options.
	fit  kit.FitOptions
	soft [][][]float32
	// refresh, every refreshEvery steps, recomputes the soft targets from
	// the current model's predictions (self-training).
	refresh      func(preds []Prediction) ([][][]float32, error)
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
}

// TrainerOption configures a Trainer.
type TrainerOption func(*Trainer)

// WithLogger logs epochs and noisy-label removal to l.
func WithLogger(l *slog.Logger) TrainerOption { return func(t *Trainer) { t.log = l } }

// WithProgress reports every batch to f.
func WithProgress(f func(Progress)) TrainerOption { return func(t *Trainer) { t.fit.Progress = f } }

// WithCheckpoints calls save after every epoch with a directory holding the
// run's state (weights, optimizer moments, noisy-label weights, history);
// save must copy what it keeps before returning. workDir is where the
// trainer writes it.
func WithCheckpoints(workDir string, save func(dir string, epoch int) error) TrainerOption {
	return func(t *Trainer) { t.fit.StateDir, t.fit.Checkpoint = workDir, save }
}

// WithFitOptions sets the logger, progress, checkpoints and resumption
// at once (kit.StageOptions gives a stage's).
func WithFitOptions(o kit.FitOptions) TrainerOption {
	return func(t *Trainer) {
		t.fit = o
		if o.Log != nil {
			t.log = o.Log
		}
	}
}

// Resume continues the run from a directory a checkpoint callback was
// given (or a copy of it), if it holds a state; an empty or missing
// directory starts afresh.
func Resume(dir string) TrainerOption { return func(t *Trainer) { t.fit.Resume = dir } }

// WithSoftTargets gives the soft targets of LossKL, aligned with the
// training sentences: soft[i][t] holds p(O) of token t of sentence i, then
// the weights of the entity tags in Labels order (renormalized by the loss;
// all 0 leaves the token out of the type loss); a nil row leaves the token
// out of the loss altogether (a self-training teacher not confident
// enough). LossTagSets reads the same layout as weighted sets: the tags
// above 0, each weighted by its value over the row's largest, every tag
// for a nil row. The sentences' tags are not used and may be absent.
func WithSoftTargets(soft [][][]float32) TrainerOption { return func(t *Trainer) { t.soft = soft } }

// WithSoftRefresh makes the soft targets follow the model being trained,
// as RoSTER's self-training does: every `every` steps, the model (without
// dropout) predicts the training sentences, and refresh turns its
// predictions (Tagger.Predict's: per-token distributions over the tag set,
// and the tags, a CRF's Viterbi path) into the targets of the next steps,
// in the layout of WithSoftTargets, which gives the targets of the first
// steps.
func WithSoftRefresh(every int, refresh func(preds []Prediction) ([][][]float32, error)) TrainerOption {
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
	loss, err := configureLoss(cfg, model.Config.Head) // checked by validate
	if err != nil {
		return nil, fmt.Errorf("training config: %w", err)
	}
	if tl, ok := loss.(TagSetLoss); ok {
		if loss, err = tl.ForLabels(model.Labels); err != nil {
			return nil, fmt.Errorf("training config: %w", err)
		}
	}
	t := &Trainer{model: model, cfg: cfg, loss: loss, removal: removalOfLoss(loss), log: slog.New(slog.DiscardHandler)}
	model.tuneEncoder(cfg.EncoderLearningRate > 0)
	for _, o := range opts {
		o(t)
	}
	t.fit.Log = t.log
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

// Run trains on trainSet, whose sentences must all carry tags (any scheme;
// they are converted to the tagger's, and tags of corpus.UnknownType count
// as entities of unknown type). With a non-nil dev set, every epoch is
// scored on it (entity micro F1), the best epoch's weights are kept, and
// Patience applies (with EvalEvery, also within epochs). Run computes on
// an OS thread of its own (see kit.OnComputeThread) and waits for it.
func (t *Trainer) Run(ctx context.Context, trainSet, dev *corpus.Corpus) (res *Result, err error) {
	kit.OnComputeThread(func(func()) {
		res, err = t.run(ctx, trainSet, dev)
	})
	return res, err
}

// run is Run on the computing thread: the data encoded once, the
// unlabeled objective's state, and kit.Fit over the tagger's steps.
func (t *Trainer) run(ctx context.Context, trainSet, dev *corpus.Corpus) (*Result, error) {
	d, err := t.prepareData(trainSet, dev)
	if err != nil {
		return nil, err
	}
	if d.unlabeled, err = t.startUnlabeled(); err != nil {
		return nil, err
	}
	defer d.unlabeled.close()
	r := &fitRun{t: t, d: d}
	// The run trains with the intervals and epochs its corpus's size
	// gives; the Trainer keeps its settings as given.
	given := t.cfg
	defer func() { t.cfg = given }()
	spe, err := r.StepsPerEpoch()
	if err != nil {
		return nil, err
	}
	t.cfg = t.cfg.withSteps(spe)
	cfg := t.cfg
	t.log.Info("training", "examples", len(d.train), "epochs", cfg.Epochs, "steps_per_epoch", spe, "eval_every", cfg.EvalEvery, "allocator", kit.AllocatorName())
	fr, err := kit.Fit(ctx, r, kit.FitConfig{Epochs: cfg.Epochs, LearningRate: cfg.LearningRate, Warmup: cfg.Warmup,
		MaxGradNorm: cfg.MaxGradNorm, Patience: cfg.Patience, MinSteps: cfg.MinSteps, EvalEvery: cfg.EvalEvery}, t.fit)
	if err != nil {
		return nil, err
	}
	return &Result{Epochs: r.st.History, BestEpoch: fr.BestEpoch, BestStep: fr.BestStep, BestDevF1: fr.BestScore,
		Steps: fr.Steps, Evaluations: fr.Evaluations, Resumed: fr.Resumed, MaxEpochs: cfg.Epochs, EvalEvery: cfg.EvalEvery}, nil
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
	d.weights = newNoiseWeights(exs, t.removal.interval > 0)
	return d, nil
}

// fitRun is a run of the Trainer as kit.Fit drives it.
type fitRun struct {
	t  *Trainer
	d  *runData
	st fitState
	// The epoch's batches and random streams (StartEpoch).
	batches   [][]int
	unlabeled [][]int
	dropout   *rand.Rand
	noise     *rand.Rand
	aug       []example
	sampled   *sampling
}

// fitState is the tagger's part of a checkpoint's state.json, beside
// kit.FitState's fields.
type fitState struct {
	History    []EpochReport `json:"history"`
	KeepEntity []byte        `json:"keep_entity,omitempty"` // noisy-label weights, token by token
	KeepType   []byte        `json:"keep_type,omitempty"`
}

var (
	_ kit.Evaluator    = (*fitRun)(nil)
	_ kit.Checkpointer = (*fitRun)(nil)
	_ kit.Grouped      = (*fitRun)(nil)
)

func (r *fitRun) Device() gotch.Device { return r.t.model.device }

// Weights are those training updates: a frozen encoder's are left out.
func (r *fitRun) Weights() []ts.NamedTensor { return r.t.model.trainedWeights() }

// ParamGroups puts a fine-tuned encoder's weights on a schedule of their
// own.
func (r *fitRun) ParamGroups() []kit.ParamGroup { return r.t.model.paramGroups(r.t.cfg) }

func (r *fitRun) Evaluates() bool             { return r.d.devGold != nil }
func (r *fitRun) Evaluate() (float64, error)  { return r.t.score(r.d.dev, r.d.devGold) }
func (r *fitRun) State() any                  { return &r.st }
func (r *fitRun) StepsPerEpoch() (int, error) { return len(r.epochBatches(0)), nil }

// epochBatches are the training set's batches in epoch (0: the count's
// draw, for the schedule).
func (r *fitRun) epochBatches(epoch int) [][]int {
	return bucketBatches(r.d.train, r.t.cfg.BatchSize, r.t.rng(streamBatches+uint64(epoch)))
}

func (r *fitRun) StartEpoch(epoch int) (int, error) {
	t, u := r.t, r.d.unlabeled
	r.batches = r.epochBatches(epoch)
	r.dropout = t.rng(streamDropout + uint64(epoch))
	r.noise = t.rng(streamUnlabeled + uint64(epoch))
	r.unlabeled = nil
	if u != nil {
		r.unlabeled = u.epochBatches(len(r.batches), t.cfg.BatchSize, r.noise)
	}
	r.aug = nil
	if t.augment != nil {
		var err error
		if r.aug, err = t.augmentedExamples(epoch, r.d.train); err != nil {
			return 0, err
		}
	}
	r.sampled = &sampling{epoch: epoch, epochs: t.cfg.Epochs, rng: t.rng(streamSample + uint64(epoch))}
	return len(r.batches), nil
}

// Step runs noisy-label removal and the soft targets' refresh when they
// are due, then trains on the batch.
func (r *fitRun) Step(_ context.Context, s *kit.Step) (kit.StepResult, error) {
	t, exs, weights := r.t, r.d.train, r.d.weights
	if every := t.removal.interval; every > 0 && (s.Done+1)%every == 0 {
		if err := t.removeNoisyLabels(exs, weights); err != nil {
			return kit.StepResult{}, fmt.Errorf("noisy-label removal: %w", err)
		}
	}
	if t.refresh != nil && s.Done > 0 && s.Done%t.refreshEvery == 0 {
		if err := t.refreshSoft(exs); err != nil {
			return kit.StepResult{}, fmt.Errorf("refreshing soft targets: %w", err)
		}
	}
	ids := r.batches[s.Batch]
	b := newBatch(exs, ids)
	var ab *Batch
	if r.aug != nil {
		withTargetsOf(r.aug, exs, ids)
		ab = newBatch(r.aug, ids)
	}
	us := unlabeledStep{run: r.d.unlabeled, noise: r.noise}
	if r.unlabeled != nil {
		us.ids = r.unlabeled[s.Batch]
	}
	loss, learned, err := t.step(b, ab, exs, r.aug, weights.of(), us, s, r.dropout, r.sampled)
	return kit.StepResult{Loss: loss, Tokens: b.n, Skipped: !learned}, err
}

// EndEpoch adds the epoch's report to the history and logs it.
func (r *fitRun) EndEpoch(e kit.EpochStats) error {
	rep := EpochReport{Epoch: e.Epoch, TrainLoss: e.Loss, DevF1: e.Score, TokensPerSec: e.TokensPerSec}
	rep.RemovedEntity, rep.RemovedType = r.d.weights.removed()
	rep.Negatives, rep.Missampled = r.sampled.negatives, r.sampled.missampled
	if r.t.complete != nil && r.sampled.negatives > 0 {
		rate := float64(r.sampled.missampled) / float64(r.sampled.negatives)
		rep.Missampling = &rate
	}
	rep.RSSBytes = kit.ResidentBytes()
	r.st.History = append(r.st.History, rep)
	attrs := []any{"epoch", e.Epoch, "loss", rep.TrainLoss, "dev_f1", rep.DevF1, "tokens_per_sec", math.Round(rep.TokensPerSec),
		"removed_entity", rep.RemovedEntity, "removed_type", rep.RemovedType, "rss_mb", rep.RSSBytes >> 20}
	if rep.Missampling != nil {
		attrs = append(attrs, "negatives", rep.Negatives, "missampling", *rep.Missampling)
	}
	r.t.log.Info("epoch done", attrs...)
	return nil
}

// SaveCheckpoint writes only what LoadCheckpoint reads: the weights, not
// the whole tagger. The frozen pretrained table (the bulk of a saved
// tagger, ~140 MB with the full wink vectors) never changes in training and
// comes back from the embeddings input on resume, so it is not re-uploaded
// every epoch.
func (r *fitRun) SaveCheckpoint(dir string) error {
	r.st.KeepEntity, r.st.KeepType = r.d.weights.pack()
	return r.t.model.saveWeights(filepath.Join(dir, WeightsFile))
}

func (r *fitRun) LoadCheckpoint(dir string) error {
	if err := r.t.model.loadWeights(filepath.Join(dir, WeightsFile)); err != nil {
		return err
	}
	if err := r.d.weights.unpack(r.st.KeepEntity, r.st.KeepType); err != nil {
		return fmt.Errorf("%s: %w", kit.StateFile, err)
	}
	return nil
}

// step trains on one batch: forward, loss, backward, update. learned is
// false when the batch had nothing to learn from. ab, if not nil, is the
// batch's augmented copy, drawn from aug (WithAugmented); u holds the
// step's unlabeled sentences, if any (WithUnlabeled); s the optimizer and
// the learning rates.
func (t *Trainer) step(b, ab *Batch, exs, aug []example, weights []tokenWeights, u unlabeledStep, s *kit.Step, dropout *rand.Rand, sampled *sampling) (loss float64, learned bool, err error) {
	m := t.model
	g := kit.NewGraph(m.device)
	defer g.Free()
	err = kit.Guard(func() {
		lb := &LossBatch{G: g, Head: m.head, H: m.forward(g, b, true, dropout), Batch: b, exs: exs, weights: weights, K: m.Labels.NumTags(), sampling: sampled}
		l := t.loss.Compute(lb)
		if ab != nil {
			l = addLosses(g, l, augmentedLoss(&LossBatch{G: g, Head: m.head, H: m.forward(g, ab, true, dropout), Batch: ab, exs: aug, K: m.Labels.NumTags()}, lb))
		}
		if u.ids != nil {
			l = addLosses(g, l, t.unlabeledLoss(g, u.run, u.ids, dropout, u.noise))
		}
		if l == nil {
			return // every token ignored or removed
		}
		s.Opt.ZeroGrad(g)
		if u.ids != nil && u.run.opt != nil {
			u.run.opt.ZeroGrad(g)
		}
		g.Check(l.Backward())
		s.Apply(g, s.Opt)
		if u.ids != nil && u.run.opt != nil {
			u.run.opt.Update(g, s.LR)
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
	soft, err := t.refresh(preds)
	if err != nil {
		return err
	}
	return attachSoft(exs, soft, t.model.Labels.NumTags())
}

// attachSoft checks soft targets against the examples and gives each
// example its own, with all-O hard targets (unused by the soft losses).
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
