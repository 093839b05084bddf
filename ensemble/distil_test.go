package ensemble

import (
	"context"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/train"
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

func fixtureCorpus() *corpus.Corpus {
	c := &corpus.Corpus{}
	for _, line := range fixture {
		var s corpus.Sentence
		for _, w := range strings.Fields(line) {
			tok, tag, ok := strings.Cut(w, "/")
			if !ok {
				tag = "O"
			}
			s.Tokens, s.Tags = append(s.Tokens, tok), append(s.Tags, tag)
		}
		c.Sentences = append(c.Sentences, s)
	}
	return c
}

func tinyJob(t *testing.T, seed uint64, epochs int) train.Job {
	cfg := train.DefaultConfig()
	cfg.WordDim, cfg.CharDim, cfg.CharFilters, cfg.CasingDim, cfg.Hidden, cfg.Dropout = 8, 4, 6, 4, 8, 0
	run := train.DefaultTrainConfig()
	run.Epochs, run.BatchSize, run.LearningRate, run.Seed = epochs, 2, 0.02, seed
	device, err := train.ParseDevice("cpu")
	if err != nil {
		t.Fatal(err)
	}
	return train.Job{Train: fixtureCorpus(), Model: cfg, Run: run, Device: device, MinWordCount: 1}
}

// TestDistillationLowersLoss: two taggers of different seeds, their
// predictions averaged, and a third tagger distilled into the average with
// loss kl (train.tagger's configuration for RoSTER's distillation): the
// KL to the ensemble goes down over the epochs.
func TestDistillationLowersLoss(t *testing.T) {
	ctx := context.Background()
	var preds []*dataset.Predictions
	for _, seed := range []uint64{1, 2} {
		m, _, err := train.Fit(ctx, tinyJob(t, seed, 3))
		if err != nil {
			t.Fatal(err)
		}
		p, err := m.Predict(fixtureCorpus(), 64)
		m.Close()
		if err != nil {
			t.Fatal(err)
		}
		preds = append(preds, &dataset.Predictions{Scheme: m.Labels.Scheme.String(), Tags: m.Labels.Tags, Sentences: p})
	}
	avg, err := Average([]string{"seed 1", "seed 2"}, preds)
	if err != nil {
		t.Fatal(err)
	}
	job := tinyJob(t, 3, 5)
	job.Run.Loss, job.Soft = train.LossKL, avg.Soft()
	m, res, err := train.Fit(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	first, last := res.Epochs[0].TrainLoss, res.Epochs[len(res.Epochs)-1].TrainLoss
	if !(last < first) {
		t.Errorf("distillation loss from %v to %v, want lower", first, last)
	}
	t.Logf("distillation loss %v -> %v", first, last)
}
