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
