package selftrain

import (
	"context"
	"math"
	"testing"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/corpus/corpustest"
	"github.com/nerflow/nerflow/train/tagger"
)

// fixture is a tiny IO-tagged corpus, token/TAG (O when untagged).
var fixture = []string{
	"John/I-PER Smith/I-PER lives in Paris/I-LOC .",
	"Mary/I-PER visited Berlin/I-LOC yesterday .",
	"The mayor of Rome/I-LOC met Anna/I-PER .",
	"Peter/I-PER flew to London/I-LOC on Monday .",
	"In Madrid/I-LOC , Carlos/I-PER won .",
	"Anna/I-PER likes Rome/I-LOC .",
}

func fixtureCorpus() *corpus.Corpus { return corpustest.Inline(fixture...) }

// tinyJob trains a small tagger on the fixture with cross entropy.
func tinyJob(t *testing.T, seed uint64, epochs int) tagger.Job {
	t.Helper()
	cfg := tagger.DefaultConfig()
	cfg.WordDim, cfg.CharDim, cfg.CharFilters, cfg.CasingDim, cfg.Hidden, cfg.Dropout = 8, 4, 6, 4, 8, 0
	run := tagger.DefaultTrainConfig()
	run.Epochs, run.BatchSize, run.LearningRate, run.Seed = epochs, 2, 0.02, seed
	device, err := tagger.ParseDevice("cpu")
	if err != nil {
		t.Fatal(err)
	}
	return tagger.Job{Train: fixtureCorpus(), Model: cfg, Run: run, Device: device, MinWordCount: 1}
}

// tinyTagger is the starting point of self-training: a tiny tagger
// trained with cross entropy.
func tinyTagger(t *testing.T) *tagger.Tagger {
	t.Helper()
	return tinyTaggerWith(t, tagger.TokenHead)
}

// tinyTaggerWith is tinyTagger with another head: a CRF trained with the
// partial-label loss (BOND's first stage with partial=true), a span head
// with negative sampling.
func tinyTaggerWith(t *testing.T, head string) *tagger.Tagger {
	t.Helper()
	job := tinyJob(t, 1, 8)
	job.Model.Head = head
	switch head {
	case tagger.CRFHead:
		job.Run.Loss = tagger.LossPartial
	case tagger.SpanHead:
		job.Run.Loss = tagger.LossNegSample
	}
	m, _, err := tagger.Fit(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

func tinySelfTraining(epochs, every int) Config {
	cfg := DefaultConfig()
	cfg.Run.Epochs, cfg.Run.BatchSize, cfg.Run.LearningRate, cfg.UpdateInterval = epochs, 2, 0.01, every
	cfg.Targets.Threshold = 0.6 // the tiny tagger is not very confident
	return cfg
}

// TestSelfTrainingRoundLowersLoss: within one round (targets fixed: the
// interval exceeds the run), the loss of the targets goes down.
func TestSelfTrainingRoundLowersLoss(t *testing.T) {
	m := tinyTagger(t)
	res, err := Train(context.Background(), m, fixtureCorpus(), nil, tinySelfTraining(5, 1000))
	if err != nil {
		t.Fatal(err)
	}
	first, last := res.Epochs[0].TrainLoss, res.Epochs[len(res.Epochs)-1].TrainLoss
	if !(last < first) || math.IsNaN(last) {
		t.Errorf("self-training loss from %v to %v, want lower", first, last)
	}
	t.Logf("self-training loss %v -> %v over %d steps", first, last, res.Steps)
}

// TestTargetsFollowTheModel: with an interval of 2 steps the trainer asks
// for new targets before steps 3, 5, ..., with the predictions of the model
// as it is then.
func TestTargetsFollowTheModel(t *testing.T) {
	m := tinyTagger(t)
	c := fixtureCorpus()
	start, err := m.Predict(c, 64)
	if err != nil {
		t.Fatal(err)
	}
	initial := make([][][]float32, len(start))
	for i, p := range start {
		initial[i] = p.Probs
	}
	soft, err := SoftLabels(initial, Targets{Threshold: 0.6, Entity: EntityHard})
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	refresh := func(preds []tagger.Prediction) ([][][]float32, error) {
		probs := probsOf(preds)
		calls++
		now, err := m.Predict(c, 64)
		if err != nil {
			return nil, err
		}
		moved := false
		for i := range now {
			for tok, row := range now[i].Probs {
				for k, x := range row {
					if math.Abs(float64(x-probs[i][tok][k])) > 1e-5 {
						t.Fatalf("refresh %d: sentence %d token %d: given %v, the model predicts %v", calls, i+1, tok+1, probs[i][tok], row)
					}
					moved = moved || math.Abs(float64(x-initial[i][tok][k])) > 1e-5
				}
			}
		}
		if !moved {
			t.Errorf("refresh %d: the predictions are those of the start, the model did not move", calls)
		}
		return SoftLabels(probs, Targets{Threshold: 0.6, Entity: EntityHard})
	}
	cfg := tinySelfTraining(2, 2)
	tr, err := tagger.NewTrainer(m, cfg.Run, tagger.WithSoftTargets(soft), tagger.WithSoftRefresh(2, refresh))
	if err != nil {
		t.Fatal(err)
	}
	res, err := tr.Run(context.Background(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := (res.Steps - 1) / 2; calls != want || calls == 0 {
		t.Errorf("%d refreshes over %d steps, want %d", calls, res.Steps, want)
	}
}

// trainProgress calls f with the step after every step.
func trainProgress(f func(step int)) tagger.TrainerOption {
	return tagger.WithProgress(func(p tagger.Progress) { f(p.Step) })
}
