package selftrain

import (
	"context"
	"testing"

	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/ensemble"
	"github.com/nerflow/nerflow/train/tagger"
)

// TestDistillationLowersLoss: two taggers of different seeds, their
// predictions averaged (ensemble.Average), and a third tagger distilled
// into the average with loss kl (train.tagger's configuration for RoSTER's
// distillation, the step before self-training): the KL to the ensemble
// goes down over the epochs.
func TestDistillationLowersLoss(t *testing.T) {
	ctx := context.Background()
	var preds []*dataset.Predictions
	for _, seed := range []uint64{1, 2} {
		m, _, err := tagger.Fit(ctx, tinyJob(t, seed, 3))
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
	avg, err := ensemble.Average([]string{"seed 1", "seed 2"}, preds)
	if err != nil {
		t.Fatal(err)
	}
	job := tinyJob(t, 3, 5)
	job.Run.Loss, job.Soft = tagger.LossKL, avg.Soft()
	m, res, err := tagger.Fit(ctx, job)
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
