package tagger

import (
	"context"
	"slices"
	"testing"

	"github.com/nerflow/nerflow/corpus"
)

// stepsOf lists the steps of evaluations.
func stepsOf(evals []Evaluation) []int {
	var out []int
	for _, e := range evals {
		out = append(out, e.Step)
	}
	return out
}

// With EvalEvery, the dev set scores the model every EvalEvery steps and
// at the end of each epoch: 10 sentences in batches of 1 are 10 steps an
// epoch, so every 3 steps over 2 epochs scores at steps 3, 6, 9, 10 (end
// of epoch 1), 12, 15, 18 and 20.
func TestEvalEveryScoresWithinEpochs(t *testing.T) {
	c := fixtureCorpus(fixture)
	cfg := tinyTrainConfig(LossCE)
	cfg.Epochs, cfg.BatchSize, cfg.EvalEvery = 2, 1, 3
	tr, err := NewTrainer(newTiny(t, c, tinyConfig(TokenHead, "io"), 1), cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := tr.Run(context.Background(), c, c)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := stepsOf(res.Evaluations), []int{3, 6, 9, 10, 12, 15, 18, 20}; !slices.Equal(got, want) {
		t.Errorf("evaluated at steps %v, want %v", got, want)
	}
	// The best is the first evaluation of the highest F1; each epoch's F1
	// is that of its last step.
	best := res.Evaluations[0]
	for _, e := range res.Evaluations {
		if e.Score > best.Score {
			best = e
		}
	}
	if res.BestStep != best.Step || res.BestEpoch != best.Epoch || res.BestDevF1 != best.Score {
		t.Errorf("best step %d (epoch %d, F1 %v), want %+v", res.BestStep, res.BestEpoch, res.BestDevF1, best)
	}
	if res.Epochs[0].DevF1 != res.Evaluations[3].Score || res.Epochs[1].DevF1 != res.Evaluations[7].Score {
		t.Errorf("epoch F1s %v, %v, want those of steps 10 and 20 %+v", res.Epochs[0].DevF1, res.Epochs[1].DevF1, res.Evaluations)
	}
}

// Patience counts evaluations: on a dev set without entities every score
// is 0, so the first (step 2) stays the best, and with patience 3 the run
// stops after the evaluations at steps 4, 6 and 8, within the first epoch,
// holding the weights of step 2.
func TestEvalEveryStopsEarlyAndKeepsTheBestStep(t *testing.T) {
	c := fixtureCorpus(fixture)
	dev := &corpus.Corpus{}
	for _, s := range c.Sentences {
		dev.Sentences = append(dev.Sentences, corpus.Sentence{Tokens: s.Tokens, Tags: make([]string, len(s.Tokens))})
		for i := range s.Tokens {
			dev.Sentences[len(dev.Sentences)-1].Tags[i] = "O"
		}
	}
	m := newTiny(t, c, tinyConfig(TokenHead, "io"), 1)
	var atStep2 []Prediction
	cfg := tinyTrainConfig(LossCE)
	cfg.Epochs, cfg.BatchSize, cfg.EvalEvery, cfg.Patience = 5, 1, 2, 3
	tr, err := NewTrainer(m, cfg, WithProgress(func(p Progress) {
		if p.Step == 2 {
			var err error
			if atStep2, err = m.Predict(c, 4); err != nil {
				t.Fatal(err)
			}
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	res, err := tr.Run(context.Background(), c, dev)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := stepsOf(res.Evaluations), []int{2, 4, 6, 8}; !slices.Equal(got, want) || res.Steps != 8 || len(res.Epochs) != 1 {
		t.Fatalf("evaluations at %v, %d steps, %d epochs: want %v, 8 steps, 1 epoch", got, res.Steps, len(res.Epochs), want)
	}
	if res.BestStep != 2 || res.BestEpoch != 1 {
		t.Errorf("best step %d of epoch %d, want step 2 of epoch 1", res.BestStep, res.BestEpoch)
	}
	now, err := m.Predict(c, 4)
	if err != nil {
		t.Fatal(err)
	}
	for i := range now {
		for tok, row := range now[i].Probs {
			if !slices.Equal(row, atStep2[i].Probs[tok]) {
				t.Fatalf("sentence %d token %d: %v after the run, %v at step 2: the best step's weights were not restored", i+1, tok+1, row, atStep2[i].Probs[tok])
			}
		}
	}
}

// The automatic interval and epochs for two corpus sizes at batches of 32:
// CoNLL-2003's 14,041 sentences are 439 steps an epoch, scored every 55
// (an eighth), and 3 epochs already exceed 1,000 steps; the shipped
// sample's 800 are 25 steps an epoch, scored every 50 (the floor), and
// 1,000 steps take 40 epochs.
func TestAutoIntervalsFollowTheCorpusSize(t *testing.T) {
	for _, tc := range []struct {
		sentences, steps, evalEvery, epochs int
	}{
		{14041, 439, 55, 3},
		{800, 25, 50, 40},
	} {
		c := &corpus.Corpus{Sentences: make([]corpus.Sentence, tc.sentences)}
		for i := range c.Sentences {
			c.Sentences[i].Tokens = []string{"a"}
		}
		spe := StepsPerEpoch(c, 32)
		cfg := TrainConfig{Epochs: 3, EvalEvery: EvalAuto, MinSteps: 1000}.withSteps(spe)
		if spe != tc.steps || cfg.EvalEvery != tc.evalEvery || cfg.Epochs != tc.epochs {
			t.Errorf("%d sentences: %d steps an epoch, eval every %d, %d epochs; want %d, %d, %d",
				tc.sentences, spe, cfg.EvalEvery, cfg.Epochs, tc.steps, tc.evalEvery, tc.epochs)
		}
	}
	// Given values stay: a fixed interval, and epochs beyond min_steps.
	if cfg := (TrainConfig{Epochs: 50, EvalEvery: 7, MinSteps: 1000}).withSteps(25); cfg.EvalEvery != 7 || cfg.Epochs != 50 {
		t.Errorf("fixed settings changed: %+v", cfg)
	}
}

// A run resolves them on its own batches: 10 sentences and an empty one
// in batches of 3 are 4 steps an epoch (the empty sentence is never a
// step, and StepsPerEpoch says so), so min_steps 10 makes 3 epochs, and
// the automatic interval (at least 50 steps) leaves the scores at the
// epochs' ends. The Trainer keeps its settings as given.
func TestRunResolvesAutoIntervals(t *testing.T) {
	c := fixtureCorpus(fixture)
	c.Sentences = append(c.Sentences, corpus.Sentence{Tokens: []string{}, Tags: []string{}})
	if got := StepsPerEpoch(c, 3); got != 4 {
		t.Fatalf("StepsPerEpoch %d, want 4", got)
	}
	cfg := tinyTrainConfig(LossCE)
	cfg.Epochs, cfg.BatchSize, cfg.EvalEvery, cfg.MinSteps = 1, 3, EvalAuto, 10
	tr, err := NewTrainer(newTiny(t, c, tinyConfig(TokenHead, "io"), 1), cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := tr.Run(context.Background(), c, fixtureCorpus(fixture))
	if err != nil {
		t.Fatal(err)
	}
	if got := stepsOf(res.Evaluations); res.Steps != 12 || len(res.Epochs) != 3 || res.MaxEpochs != 3 || res.EvalEvery != AutoEvalMinSteps || !slices.Equal(got, []int{4, 8, 12}) {
		t.Errorf("%d steps, %d epochs (max %d), eval every %d at %v: want 12 steps, 3 epochs, every %d at [4 8 12]",
			res.Steps, len(res.Epochs), res.MaxEpochs, res.EvalEvery, got, AutoEvalMinSteps)
	}
	if tr.cfg.Epochs != 1 || tr.cfg.EvalEvery != EvalAuto {
		t.Errorf("the trainer's settings became %+v", tr.cfg)
	}
}
