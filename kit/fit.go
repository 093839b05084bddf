package kit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/ts"
)

// Fit is the training loop of every model here: epochs of steps at the
// learning rate of a warm-up-then-decay schedule, one Adam optimizer with
// global-norm clipping over the model's weights, evaluation on a dev set at
// the end of each epoch (and every EvalEvery steps), the best evaluation's
// weights kept and put back at the end, early stopping after Patience
// evaluations without a better score, a checkpoint after every epoch and
// resumption from one, progress after every step. A model brings what is
// its own through the Learner interface (its batches, its loss, its
// report) and, optionally, Evaluator and Checkpointer.
//
// A checkpoint is a directory holding state.json (FitState's fields and,
// merged in, the Checkpointer's own), optimizer.pt (the moments), the
// files of the Checkpointer (its weights), and best.pt (the best
// evaluation's weights, with a dev set). Runs are reproducible when the
// model draws its randomness from the seed and the epoch alone: a run
// resumed at an epoch boundary then trains as the uninterrupted one.
//
// Fit runs on an OS thread of its own (OnComputeThread, where the caller
// is not on one already) and waits for it.
func Fit(ctx context.Context, m Learner, cfg FitConfig, o FitOptions) (res *FitResult, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	OnComputeThread(func(refresh func()) {
		l := &loop{m: m, cfg: cfg, o: o, refresh: refresh}
		res, err = l.run(ctx)
	})
	return res, err
}

// FitConfig are the loop's hyperparameters, which every model shares.
type FitConfig struct {
	Epochs       int
	LearningRate float64 // the schedule's peak
	// Warmup is the fraction of all steps spent warming the learning rate
	// up linearly; it then decays linearly to 0 at the last step.
	Warmup      float64
	MaxGradNorm float64 // global L2 norm the gradients are clipped to (0: no clipping)
	// Patience stops training after that many evaluations without a better
	// score (0: never); the best evaluation's weights are kept either way.
	Patience int
	// MinSteps holds Patience back until that many steps are done: a
	// model learned from scratch scores near 0 on dev for its first few
	// hundred steps, and evaluations without a better score there say
	// nothing about overfitting (0: patience from the first step).
	MinSteps int
	// EvalEvery evaluates every that many steps as well as at the end of
	// each epoch (0: at the end of each epoch only).
	EvalEvery int
}

// Validate checks the ranges of the settings.
func (c FitConfig) Validate() error {
	if c.Epochs < 1 || c.LearningRate <= 0 {
		return fmt.Errorf("epochs %d, learning rate %v: both must be positive", c.Epochs, c.LearningRate)
	}
	if c.Warmup < 0 || c.Warmup > 1 || c.MaxGradNorm < 0 || c.Patience < 0 || c.EvalEvery < 0 || c.MinSteps < 0 {
		return fmt.Errorf("warmup %v, max grad norm %v, patience %d, eval every %d, min steps %d out of range", c.Warmup, c.MaxGradNorm, c.Patience, c.EvalEvery, c.MinSteps)
	}
	return nil
}

// FitOptions are where a run reports and keeps its state.
type FitOptions struct {
	Log *slog.Logger
	// Progress, if set, receives a report after every step.
	Progress func(Progress)
	// Checkpoint, if set, is called after every epoch with StateDir, which
	// then holds everything needed to resume; it must copy what it keeps
	// before returning. An error ends the run.
	Checkpoint func(dir string, epoch int) error
	// StateDir is where checkpoints and the best weights are written; a
	// temporary directory, removed at the end, when empty.
	StateDir string
	// Resume continues the run from a directory Checkpoint was given (or a
	// copy of it), when it holds a state; an empty or missing directory
	// starts afresh.
	Resume string
}

// Learner is a model as Fit trains it.
type Learner interface {
	// Device is where the weights live.
	Device() gotch.Device
	// Weights are the parameters the optimizer updates, by name (the names
	// of checkpoints and of the best weights' file).
	Weights() []ts.NamedTensor
	// StepsPerEpoch is the number of steps of an epoch, for the schedule.
	StepsPerEpoch() (int, error)
	// StartEpoch prepares epoch (1-based) and returns its number of steps.
	StartEpoch(epoch int) (steps int, err error)
	// Step trains on the s.Batch-th batch of the epoch: forward, loss,
	// then s.Update with the loss.
	Step(ctx context.Context, s *Step) (StepResult, error)
	// EndEpoch completes the epoch: the model adds its report (to the
	// history its Checkpointer saves, if any) and logs it.
	EndEpoch(e EpochStats) error
}

// ParamGroup is a set of a Learner's weights that learn on a schedule of
// their own: its own peak learning rate and warm-up, then the same linear
// decay to 0 at the last step (a pretrained encoder fine-tuned under a new
// head: a lower rate, a longer warm-up).
type ParamGroup struct {
	Name         string   // for errors and logs
	Weights      []string // names among Learner.Weights
	LearningRate float64  // the schedule's peak
	Warmup       float64  // fraction of all steps
}

// NewGroupedAdam is the optimizer Fit trains with: Adam over weights,
// gradients clipped to maxGradNorm, and the weights of groups[k] in
// parameter group k+1 (the rest in group 0), so that a caller stepping a
// Learner's weights by hand updates them as Fit would.
func NewGroupedAdam(weights []ts.NamedTensor, maxGradNorm float64, groups []ParamGroup) (*Adam, error) {
	for _, pg := range groups {
		if pg.LearningRate < 0 || pg.Warmup < 0 || pg.Warmup > 1 {
			return nil, fmt.Errorf("parameter group %s: learning rate %v, warmup %v out of range", pg.Name, pg.LearningRate, pg.Warmup)
		}
	}
	names, params := SplitNamed(weights)
	opt, err := NewAdam(names, params, maxGradNorm)
	if err != nil {
		return nil, err
	}
	for k, pg := range groups {
		if err := opt.SetGroup(k+1, pg.Weights...); err != nil {
			opt.Close()
			return nil, fmt.Errorf("parameter group %s: %w", pg.Name, err)
		}
	}
	return opt, nil
}

// Grouped is a Learner some of whose weights learn on schedules of their
// own.
type Grouped interface {
	// ParamGroups are the groups beyond the default one, which holds every
	// weight no group names and follows FitConfig's schedule.
	ParamGroups() []ParamGroup
}

// Evaluator is a Learner that can have a dev set.
type Evaluator interface {
	// Evaluates says whether the run has a dev set: without one, Fit
	// never evaluates and keeps the last weights.
	Evaluates() bool
	// Evaluate scores the model as it stands (higher is better).
	Evaluate() (float64, error)
}

// Checkpointer is a Learner whose runs can be checkpointed and resumed.
type Checkpointer interface {
	// SaveCheckpoint writes the model's files (its weights) into dir.
	SaveCheckpoint(dir string) error
	// LoadCheckpoint reads them back, after State was filled from the
	// checkpoint's state.json.
	LoadCheckpoint(dir string) error
	// State is a pointer to the model's own part of state.json, a struct
	// whose JSON fields are not FitState's.
	State() any
}

// Step is one step of a run.
type Step struct {
	Epoch int // 1-based
	Batch int // 0-based, within the epoch
	// Done is the number of steps taken before this one in the run.
	Done int
	// LR is the schedule's learning rate at this step.
	LR float64
	// LRs are the learning rates of the parameter groups at this step,
	// LRs[0] = LR (Grouped); nil: one rate, LR, for every weight.
	LRs []float64
	Opt *Adam
}

// Update takes the optimizer's step on loss, a scalar of g: zero the
// gradients, backward, clip and update. Inside Guard.
func (s *Step) Update(g *Graph, loss *ts.Tensor) {
	s.Opt.ZeroGrad(g)
	g.Check(loss.Backward())
	s.Apply(g, s.Opt)
}

// Apply updates opt's parameters, whose gradients are computed, at the
// step's learning rates: each group's where opt has the groups of the
// Learner (it is the step's optimizer), LR for all otherwise.
func (s *Step) Apply(g *Graph, opt *Adam) {
	if s.LRs != nil && opt.Groups() == len(s.LRs) {
		opt.UpdateGroups(g, s.LRs)
		return
	}
	opt.Update(g, s.LR)
}

// StepResult is what a step reports.
type StepResult struct {
	Loss   float64
	Tokens int // for the throughput
	// Skipped says the batch had nothing to learn from (no update was
	// made): its loss counts in no mean.
	Skipped bool
}

// EpochStats is what the loop measured of an epoch.
type EpochStats struct {
	Epoch        int
	Loss         float64 // mean over the steps that learned
	Steps        int
	Tokens       int
	Seconds      float64 // training, without evaluation
	TokensPerSec float64
	// Score is the epoch's last evaluation, when Scored (with a dev set).
	Score  float64
	Scored bool
}

// Progress is a live report of a run, after every step.
type Progress struct {
	Epoch, Epochs int // 1-based
	Step, Steps   int // steps so far, and in the whole run
	Loss          float64
	TokensPerSec  float64
}

// Evaluation is one score on the dev set. The score is called dev_f1 in
// JSON, as checkpoints and reports have always named it: every model
// here is selected by its entity F1.
type Evaluation struct {
	Epoch int     `json:"epoch"`
	Step  int     `json:"step"` // steps done
	Score float64 `json:"dev_f1"`
}

// FitState is the loop's part of a checkpoint's state.json.
type FitState struct {
	Epoch     int          `json:"epoch"` // epochs finished
	Step      int          `json:"step"`
	BestEpoch int          `json:"best_epoch,omitempty"`
	BestStep  int          `json:"best_step,omitempty"`
	BestScore float64      `json:"best_dev_f1,omitempty"`
	SinceBest int          `json:"since_best,omitempty"` // evaluations
	Evals     []Evaluation `json:"evaluations,omitempty"`
}

// FitResult summarizes a run.
type FitResult struct {
	// BestEpoch and BestStep are those of the best evaluation, whose
	// weights the model holds (0 without a dev set); BestScore its score.
	BestEpoch, BestStep int
	BestScore           float64
	Steps               int
	Evaluations         []Evaluation
	// Resumed is the number of epochs restored from a checkpoint.
	Resumed int
}

// The files of a checkpoint.
const (
	StateFile     = "state.json"
	OptimizerFile = "optimizer.pt"
	BestFile      = "best.pt"
)

type loop struct {
	m       Learner
	cfg     FitConfig
	o       FitOptions
	refresh func()
	dir     string // where state files go: o.StateDir, o.Resume, or a temporary directory
	temp    bool   // dir is temporary
	opt     *Adam
	st      FitState
	ev      Evaluator
	total   int
	warmup  int
	groups  []ParamGroup // beyond the default one (Grouped)
	// groupWarmup is each group's warm-up in steps, [0] the default's.
	groupWarmup []int
}

func (l *loop) run(ctx context.Context) (*FitResult, error) {
	if err := l.makeDir(); err != nil {
		return nil, err
	}
	if l.temp {
		defer os.RemoveAll(l.dir)
	}
	if gr, ok := l.m.(Grouped); ok {
		l.groups = gr.ParamGroups()
	}
	opt, err := NewGroupedAdam(l.m.Weights(), l.cfg.MaxGradNorm, l.groups)
	if err != nil {
		return nil, err
	}
	defer opt.Close()
	l.opt = opt
	if ev, ok := l.m.(Evaluator); ok && ev.Evaluates() {
		l.ev = ev
	}
	res := &FitResult{}
	if l.o.Resume != "" {
		ok, err := l.restore()
		if err != nil {
			return nil, fmt.Errorf("resuming: %w", err)
		}
		if ok {
			res.Resumed = l.st.Epoch
			l.o.Log.Info("resumed training", "epochs_done", l.st.Epoch, "step", l.st.Step)
		}
	}
	perEpoch, err := l.m.StepsPerEpoch()
	if err != nil {
		return nil, err
	}
	if perEpoch == 0 {
		return nil, errors.New("training set has no tokens")
	}
	l.total = perEpoch * l.cfg.Epochs
	l.warmup = int(math.Round(l.cfg.Warmup * float64(l.total)))
	l.groupWarmup = []int{l.warmup}
	for _, pg := range l.groups {
		l.groupWarmup = append(l.groupWarmup, int(math.Round(pg.Warmup*float64(l.total))))
	}
	for epoch := l.st.Epoch + 1; epoch <= l.cfg.Epochs && !l.stopped(); epoch++ {
		l.refresh()
		if err := l.epoch(ctx, epoch); err != nil {
			return nil, err
		}
	}
	if l.stopped() {
		l.o.Log.Info("early stop", "epoch", l.st.Epoch, "step", l.st.Step, "best_step", l.st.BestStep, "best_dev_f1", l.st.BestScore)
	}
	if err := l.restoreBest(); err != nil {
		return nil, err
	}
	res.BestEpoch, res.BestStep, res.BestScore, res.Steps = l.st.BestEpoch, l.st.BestStep, l.st.BestScore, l.st.Step
	res.Evaluations = l.st.Evals
	return res, nil
}

// makeDir gives the state files a place even without checkpoints: a
// temporary directory.
func (l *loop) makeDir() error {
	l.dir = l.o.StateDir
	if l.dir == "" {
		l.dir = l.o.Resume
	}
	if l.dir != "" {
		return nil
	}
	dir, err := os.MkdirTemp("", "nerflow-fit-")
	if err != nil {
		return fmt.Errorf("training: %w", err)
	}
	l.dir, l.temp = dir, true
	return nil
}

// stopped says whether Patience evaluations went by without a better
// score, once MinSteps steps are done.
func (l *loop) stopped() bool {
	return l.ev != nil && l.cfg.Patience > 0 && l.st.SinceBest >= l.cfg.Patience && l.st.Step >= l.cfg.MinSteps
}

// epoch runs one epoch, scores it on the dev set, hands the model its
// statistics and writes a checkpoint.
func (l *loop) epoch(ctx context.Context, epoch int) error {
	steps, err := l.m.StartEpoch(epoch)
	if err != nil {
		return fmt.Errorf("epoch %d: %w", epoch, err)
	}
	start := time.Now()
	stats := EpochStats{Epoch: epoch}
	var lossSum float64
	var learned int
	for i := range steps {
		if err := ctx.Err(); err != nil {
			return err
		}
		s := &Step{Epoch: epoch, Batch: i, Done: l.st.Step, Opt: l.opt,
			LR: LearningRate(l.cfg.LearningRate, l.st.Step, l.warmup, l.total)}
		if l.groups != nil {
			s.LRs = []float64{s.LR}
			for k, pg := range l.groups {
				s.LRs = append(s.LRs, LearningRate(pg.LearningRate, l.st.Step, l.groupWarmup[k+1], l.total))
			}
		}
		r, err := l.m.Step(ctx, s)
		if err != nil {
			return fmt.Errorf("epoch %d, step %d: %w", epoch, l.st.Step+1, err)
		}
		if math.IsNaN(r.Loss) || math.IsInf(r.Loss, 0) {
			return fmt.Errorf("epoch %d, step %d: the loss diverged (%v)", epoch, l.st.Step+1, r.Loss)
		}
		l.st.Step++
		stats.Steps++
		stats.Tokens += r.Tokens
		if !r.Skipped {
			lossSum += r.Loss
			learned++
		}
		if l.o.Progress != nil {
			l.o.Progress(Progress{Epoch: epoch, Epochs: l.cfg.Epochs, Step: l.st.Step, Steps: l.total, Loss: r.Loss,
				TokensPerSec: float64(stats.Tokens) / time.Since(start).Seconds()})
		}
		if l.cfg.EvalEvery > 0 && l.ev != nil && l.st.Step%l.cfg.EvalEvery == 0 {
			if err := l.evaluate(epoch); err != nil {
				return err
			}
			if l.stopped() {
				break
			}
		}
	}
	if learned > 0 {
		stats.Loss = lossSum / float64(learned)
	}
	stats.Seconds = time.Since(start).Seconds()
	stats.TokensPerSec = float64(stats.Tokens) / stats.Seconds
	if l.ev != nil {
		// The epoch's score: its last step's, evaluated now unless
		// EvalEvery just did.
		if n := len(l.st.Evals); n == 0 || l.st.Evals[n-1].Step != l.st.Step {
			if err := l.evaluate(epoch); err != nil {
				return err
			}
		}
		stats.Score, stats.Scored = l.st.Evals[len(l.st.Evals)-1].Score, true
	}
	l.st.Epoch = epoch
	if err := l.m.EndEpoch(stats); err != nil {
		return fmt.Errorf("epoch %d: %w", epoch, err)
	}
	return l.checkpoint()
}

// evaluate scores the model and keeps its weights if they are the best so
// far.
func (l *loop) evaluate(epoch int) error {
	score, err := l.ev.Evaluate()
	if err != nil {
		return fmt.Errorf("epoch %d, step %d: dev set: %w", epoch, l.st.Step, err)
	}
	l.st.Evals = append(l.st.Evals, Evaluation{Epoch: epoch, Step: l.st.Step, Score: score})
	if l.cfg.EvalEvery > 0 {
		l.o.Log.Info("dev score", "epoch", epoch, "step", l.st.Step, "dev_f1", score, "best_dev_f1", max(score, l.st.BestScore))
	}
	if l.st.BestEpoch == 0 || score > l.st.BestScore {
		l.st.BestEpoch, l.st.BestStep, l.st.BestScore, l.st.SinceBest = epoch, l.st.Step, score, 0
		if err := os.MkdirAll(l.dir, 0o755); err != nil {
			return err
		}
		if err := SaveTensors(l.m.Weights(), filepath.Join(l.dir, BestFile)); err != nil {
			return fmt.Errorf("saving the best weights: %w", err)
		}
		return nil
	}
	l.st.SinceBest++
	return nil
}

// restoreBest puts the best evaluation's weights back when later steps
// ended the run.
func (l *loop) restoreBest() error {
	// A checkpoint written before BestStep existed has 0 there: its best
	// weights are loaded, which is right in any case.
	if l.ev == nil || l.st.BestEpoch == 0 || l.st.BestStep == l.st.Step {
		return nil
	}
	if err := LoadWeights(filepath.Join(l.dir, BestFile), l.m.Device(), l.m.Weights()); err != nil {
		return fmt.Errorf("restoring the best weights: %w", err)
	}
	return nil
}

// checkpoint writes the run's state and hands it to the Checkpoint
// callback.
func (l *loop) checkpoint() error {
	cp, ok := l.m.(Checkpointer)
	if l.o.Checkpoint == nil || !ok {
		return nil
	}
	if err := os.MkdirAll(l.dir, 0o755); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := cp.SaveCheckpoint(l.dir); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := SaveTensors(l.opt.State(), filepath.Join(l.dir, OptimizerFile)); err != nil {
		return fmt.Errorf("checkpoint: optimizer: %w", err)
	}
	b, err := mergeJSON(&l.st, cp.State())
	if err == nil {
		err = os.WriteFile(filepath.Join(l.dir, StateFile), b, 0o644)
	}
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := l.o.Checkpoint(l.dir, l.st.Epoch); err != nil {
		return fmt.Errorf("checkpoint after epoch %d: %w", l.st.Epoch, err)
	}
	return nil
}

// restore loads the state in o.Resume; false when it holds none.
func (l *loop) restore() (bool, error) {
	from := l.o.Resume
	cp, ok := l.m.(Checkpointer)
	if !ok {
		return false, errors.New("the model keeps no checkpoints")
	}
	b, err := os.ReadFile(filepath.Join(from, StateFile))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(b, &l.st); err != nil {
		return false, fmt.Errorf("%s: %w", StateFile, err)
	}
	if err := json.Unmarshal(b, cp.State()); err != nil {
		return false, fmt.Errorf("%s: %w", StateFile, err)
	}
	if err := cp.LoadCheckpoint(from); err != nil {
		return false, err
	}
	moments, err := LoadTensors(filepath.Join(from, OptimizerFile), l.m.Device())
	if err != nil {
		return false, fmt.Errorf("%s: %w", OptimizerFile, err)
	}
	defer DropTensors(moments)
	if err := l.opt.Restore(moments, l.st.Step); err != nil {
		return false, fmt.Errorf("%s: %w", OptimizerFile, err)
	}
	if l.dir != from && l.st.BestEpoch > 0 {
		if err := os.MkdirAll(l.dir, 0o755); err != nil {
			return false, err
		}
		if err := copyFile(filepath.Join(from, BestFile), filepath.Join(l.dir, BestFile)); err != nil {
			return false, fmt.Errorf("best weights: %w", err)
		}
	}
	return true, nil
}

// mergeJSON marshals the fields of both structs into one object.
func mergeJSON(a, b any) ([]byte, error) {
	fields := map[string]json.RawMessage{}
	for _, v := range []any{b, a} {
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, &fields); err != nil {
			return nil, err
		}
	}
	return json.Marshal(fields)
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}
