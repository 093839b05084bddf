package kit

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/nn"
	"github.com/sugarme/gotch/ts"
)

// line is a Learner of the least-squares fit of y = a·x + b to points
// drawn once, in batches of 4 reshuffled every epoch from the seed and the
// epoch: the smallest model that Fit trains as it trains the taggers.
type line struct {
	vs      *nn.VarStore
	w       *ts.Tensor // [a, b]
	xs, ys  []float32
	seed    uint64
	batches [][]int
	st      struct {
		Losses []float64 `json:"losses"`
	}
	// scores, when set, are what the evaluations return, in order; each
	// evaluation records the weights it scored.
	scores []float64
	scored [][]float32
	steps  []Step // what Step was given
	nanAt  int    // a step (1-based) whose loss is NaN
}

func newLine(t *testing.T, seed uint64) *line {
	t.Helper()
	l := &line{vs: nn.NewVarStore(gotch.CPU), seed: seed}
	rng := rand.New(rand.NewPCG(seed, 1))
	for range 20 {
		x := float32(rng.Float64()*4 - 2)
		l.xs, l.ys = append(l.xs, x), append(l.ys, 3*x-1+float32(rng.NormFloat64()*0.1))
	}
	p := &Initializer{Rng: rng, Root: l.vs.Root(), Device: gotch.CPU}
	if err := Guard(func() { l.w = p.Uniform("w", 1, 2) }); err != nil {
		t.Fatal(err)
	}
	return l
}

func (l *line) Device() gotch.Device        { return gotch.CPU }
func (l *line) Weights() []ts.NamedTensor   { return NamedParams(l.vs) }
func (l *line) StepsPerEpoch() (int, error) { return len(l.xs) / 4, nil }
func (l *line) State() any                  { return &l.st }

func (l *line) StartEpoch(epoch int) (int, error) {
	order := rand.New(rand.NewPCG(l.seed, 100+uint64(epoch))).Perm(len(l.xs))
	l.batches = slices.Collect(slices.Chunk(order, 4))
	return len(l.batches), nil
}

func (l *line) Step(_ context.Context, s *Step) (StepResult, error) {
	l.steps = append(l.steps, *s)
	if s.Done+1 == l.nanAt {
		return StepResult{Loss: math.NaN()}, nil
	}
	ids := l.batches[s.Batch]
	var xs, ys []float32
	for _, i := range ids {
		xs, ys = append(xs, l.xs[i], 1), append(ys, l.ys[i])
	}
	g := NewGraph(gotch.CPU)
	defer g.Free()
	var loss float64
	err := Guard(func() {
		pred := g.T(g.Floats(xs, int64(len(ids)), 2).Matmul(l.w, false))
		diff := g.T(pred.Sub(g.Floats(ys, int64(len(ids))), false))
		lt := g.T(g.T(diff.Square(false)).Mean(gotch.Float, false))
		s.Update(g, lt)
		loss = Item(lt)
	})
	return StepResult{Loss: loss, Tokens: len(ids)}, err
}

func (l *line) EndEpoch(e EpochStats) error {
	l.st.Losses = append(l.st.Losses, e.Loss)
	return nil
}

func (l *line) SaveCheckpoint(dir string) error {
	return SaveTensors(l.Weights(), filepath.Join(dir, "weights.pt"))
}

func (l *line) LoadCheckpoint(dir string) error {
	return LoadWeights(filepath.Join(dir, "weights.pt"), gotch.CPU, l.Weights())
}

func (l *line) weights(t *testing.T) []float32 {
	t.Helper()
	var w []float32
	if err := Guard(func() { w = Float32s(l.w) }); err != nil {
		t.Fatal(err)
	}
	return w
}

// scoredLine is a line with a dev set whose scores the test scripts.
type scoredLine struct {
	*line
	t *testing.T
}

func (l scoredLine) Evaluates() bool { return true }

func (l scoredLine) Evaluate() (float64, error) {
	if len(l.scored) == len(l.scores) {
		return 0, errors.New("more evaluations than scripted")
	}
	l.scored = append(l.scored, l.weights(l.t))
	return l.scores[len(l.scored)-1], nil
}

var fitCfg = FitConfig{Epochs: 4, LearningRate: 0.1, Warmup: 0.25, MaxGradNorm: 5}

// The steps get the schedule's rates (5 steps an epoch, 20 in all, 5 of
// warm-up), and the loss falls.
func TestFitSchedule(t *testing.T) {
	l := newLine(t, 1)
	res, err := Fit(context.Background(), l, fitCfg, FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Steps != 20 || len(l.steps) != 20 || len(l.st.Losses) != 4 {
		t.Fatalf("%d steps (%d seen), %d epochs, want 20 and 4", res.Steps, len(l.steps), len(l.st.Losses))
	}
	for i, s := range l.steps {
		if want := LearningRate(0.1, i, 5, 20); s.Done != i || s.LR != want || s.Epoch != i/5+1 || s.Batch != i%5 {
			t.Errorf("step %d: %+v, want done %d, lr %v, epoch %d, batch %d", i, s, i, want, i/5+1, i%5)
		}
	}
	if l.st.Losses[3] >= l.st.Losses[0] {
		t.Errorf("epoch losses %v do not fall", l.st.Losses)
	}
}

// Patience: after that many evaluations without a better score the run
// stops and the best one's weights come back. MinSteps holds it back: the
// scores that stop the first run at step 12 do not stop the second before
// step 14, and it stops at the first evaluation from there on, the best
// weights still those of step 5.
func TestFitPatienceKeepsTheBestWeights(t *testing.T) {
	for _, tc := range []struct {
		minSteps int
		scores   []float64
		// Steps 3, 5 (epoch 1's end), 6, 9, 10 (epoch 2's end), 12: the
		// sixth evaluation is the fourth without a better score than the
		// second's (a tie is no better); with MinSteps 14, then 15 (epoch
		// 3's end), the first at or past 14.
		steps []int
	}{
		{0, []float64{0.1, 0.5, 0.4, 0.5, 0.3, 0.2, 0.9}, []int{3, 5, 6, 9, 10, 12}},
		{14, []float64{0.1, 0.5, 0.4, 0.5, 0.3, 0.2, 0.1, 0.1, 0.9}, []int{3, 5, 6, 9, 10, 12, 15}},
	} {
		l := newLine(t, 2)
		l.scores = tc.scores
		cfg := fitCfg
		cfg.EvalEvery, cfg.Patience, cfg.MinSteps = 3, 4, tc.minSteps
		res, err := Fit(context.Background(), scoredLine{l, t}, cfg, FitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var steps []int
		for _, e := range res.Evaluations {
			steps = append(steps, e.Step)
		}
		if last := tc.steps[len(tc.steps)-1]; !slices.Equal(steps, tc.steps) || res.Steps != last {
			t.Fatalf("min steps %d: evaluations at steps %v, run of %d steps; want %v", tc.minSteps, steps, res.Steps, tc.steps)
		}
		if res.BestEpoch != 1 || res.BestStep != 5 || res.BestScore != 0.5 {
			t.Errorf("min steps %d: best: epoch %d, step %d, score %v; want epoch 1, step 5, 0.5", tc.minSteps, res.BestEpoch, res.BestStep, res.BestScore)
		}
		if got, want := l.weights(t), l.scored[1]; !slices.Equal(got, want) {
			t.Errorf("min steps %d: weights after the run %v, want the best evaluation's %v", tc.minSteps, got, want)
		}
	}
}

// A run stopped after its second epoch and resumed from that checkpoint
// ends with the uninterrupted run's weights, optimizer moments included.
func TestFitResumesWhereItStopped(t *testing.T) {
	whole := newLine(t, 3)
	if _, err := Fit(context.Background(), whole, fitCfg, FitOptions{}); err != nil {
		t.Fatal(err)
	}

	saved := t.TempDir()
	first := newLine(t, 3)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := Fit(ctx, first, fitCfg, FitOptions{StateDir: t.TempDir(), Checkpoint: func(dir string, epoch int) error {
		if epoch == 2 {
			cancel()
			return os.CopyFS(saved, os.DirFS(dir))
		}
		return nil
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: %v", err)
	}

	resumed := newLine(t, 99) // the weights come from the checkpoint
	resumed.seed = 3          // the batches from the seed
	resumed.xs, resumed.ys = whole.xs, whole.ys
	res, err := Fit(context.Background(), resumed, fitCfg, FitOptions{Resume: saved})
	if err != nil {
		t.Fatal(err)
	}
	if res.Resumed != 2 || res.Steps != 20 || len(resumed.steps) != 10 || len(resumed.st.Losses) != 4 {
		t.Fatalf("resumed: %+v, %d steps taken, history %v", res, len(resumed.steps), resumed.st.Losses)
	}
	if got, want := resumed.weights(t), whole.weights(t); !slices.Equal(got, want) {
		t.Errorf("resumed run ends at %v, the uninterrupted one at %v", got, want)
	}
	if !slices.Equal(resumed.st.Losses, whole.st.Losses) {
		t.Errorf("history %v, want %v", resumed.st.Losses, whole.st.Losses)
	}
}

// A diverged loss ends the run with an error naming the step.
func TestFitStopsOnADivergedLoss(t *testing.T) {
	l := newLine(t, 4)
	l.nanAt = 7
	_, err := Fit(context.Background(), l, fitCfg, FitOptions{})
	if err == nil || !strings.Contains(err.Error(), "epoch 2, step 7: the loss diverged") {
		t.Fatalf("error %v, want the divergence at epoch 2, step 7", err)
	}
}

// pair is a Learner of two scalars a and b, each of gradient 1 at every
// step: Adam's bias-corrected step is then exactly the learning rate, so
// after the run each has moved by the sum of its own group's rates.
type pair struct {
	vs    *nn.VarStore
	a, b  *ts.Tensor
	steps []Step
	group []ParamGroup
}

func (l *pair) Device() gotch.Device        { return gotch.CPU }
func (l *pair) Weights() []ts.NamedTensor   { return NamedParams(l.vs) }
func (l *pair) StepsPerEpoch() (int, error) { return 5, nil }
func (l *pair) StartEpoch(int) (int, error) { return 5, nil }
func (l *pair) EndEpoch(EpochStats) error   { return nil }
func (l *pair) ParamGroups() []ParamGroup   { return l.group }

func (l *pair) Step(_ context.Context, s *Step) (StepResult, error) {
	l.steps = append(l.steps, *s)
	g := NewGraph(gotch.CPU)
	defer g.Free()
	err := Guard(func() {
		loss := g.T(g.T(l.a.Add(l.b, false)).Sum(gotch.Float, false))
		s.Update(g, loss)
	})
	return StepResult{Loss: 1, Tokens: 1}, err
}

// A Grouped learner's group follows its own schedule (peak 0.01, warm-up
// over 40% of the steps) while the other weights follow FitConfig's (peak
// 0.1, 20%): each step carries both rates, and each weight moves by the sum
// of its own.
func TestFitStepsParameterGroupsAtTheirOwnSchedules(t *testing.T) {
	l := &pair{vs: nn.NewVarStore(gotch.CPU)}
	defer l.vs.Destroy()
	p := &Initializer{Rng: rand.New(rand.NewPCG(1, 1)), Root: l.vs.Root(), Device: gotch.CPU}
	if err := Guard(func() { l.a, l.b = p.Param("a", []float32{0}, 1), p.Param("b", []float32{0}, 1) }); err != nil {
		t.Fatal(err)
	}
	l.group = []ParamGroup{{Name: "slow", Weights: []string{"b"}, LearningRate: 0.01, Warmup: 0.4}}
	cfg := FitConfig{Epochs: 2, LearningRate: 0.1, Warmup: 0.2}
	if _, err := Fit(context.Background(), l, cfg, FitOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(l.steps) != 10 {
		t.Fatalf("%d steps, want 10", len(l.steps))
	}
	var sumA, sumB float64
	for i, s := range l.steps {
		wantA, wantB := LearningRate(0.1, i, 2, 10), LearningRate(0.01, i, 4, 10)
		if len(s.LRs) != 2 || s.LR != wantA || s.LRs[0] != wantA || s.LRs[1] != wantB {
			t.Fatalf("step %d: LR %v, LRs %v, want %v and [%v %v]", i, s.LR, s.LRs, wantA, wantA, wantB)
		}
		sumA, sumB = sumA+wantA, sumB+wantB
	}
	var a, b []float32
	if err := Guard(func() { a, b = Float32s(l.a), Float32s(l.b) }); err != nil {
		t.Fatal(err)
	}
	near(t, "a", float64(a[0]), -sumA, 1e-5)
	near(t, "b", float64(b[0]), -sumB, 1e-5)

	// A group naming no weight of the learner is an error.
	l.group = []ParamGroup{{Name: "ghost", Weights: []string{"c"}, LearningRate: 0.01}}
	if _, err := Fit(context.Background(), l, cfg, FitOptions{}); err == nil || !strings.Contains(err.Error(), "ghost") {
		t.Errorf("a group of no weight: error %v", err)
	}
}
