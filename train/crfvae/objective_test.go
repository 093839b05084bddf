package crfvae

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/kit"
	"github.com/nerflow/nerflow/train/internal/traintest"
	"github.com/nerflow/nerflow/train/tagger"
)

func tinyJob(labeled, unlabeled *corpus.Corpus, epochs int) tagger.Job {
	h := Hyperparams()
	h.Model.WordDim, h.Model.CharDim, h.Model.CharFilters, h.Model.MaxWordLen = 12, 6, 8, 12
	h.Model.CasingDim, h.Model.Hidden, h.Model.Dropout = 4, 10, 0.1
	h.Run.Epochs, h.Run.BatchSize, h.Run.LearningRate, h.Run.Seed = epochs, 4, 0.02, 7
	return tagger.Job{Train: labeled, Unlabeled: unlabeled, Types: []string{"LOC", "PER"}, Model: h.Model, Run: h.Run,
		Device: gotch.CPU, MinWordCount: 1}
}

func tinyConfig(generator string) Config {
	cfg := DefaultConfig()
	// Weight 1: the ELBO weighs as much as the CRF loss in the total.
	cfg.Generator, cfg.GenDim, cfg.GenVocab, cfg.Weight = generator, 8, 30, 1
	return cfg
}

// untagged is the fixture's sentences without their tags.
func untagged() *corpus.Corpus {
	c := traintest.Corpus(traintest.Fixture)
	for i := range c.Sentences {
		c.Sentences[i].Tags = nil
	}
	return c
}

// fit trains on the job with the CRF-VAE objective (none when cfg is nil)
// and returns the tagger's weights and the run's result.
func fit(t *testing.T, job tagger.Job, cfg *Config) (map[string][]float32, *tagger.Result) {
	t.Helper()
	var opts []tagger.TrainerOption
	if cfg != nil {
		obj, err := NewObjective(*cfg, job.Unlabeled, job.Run.Seed)
		if err != nil {
			t.Fatal(err)
		}
		defer obj.Close()
		opts = append(opts, tagger.WithUnlabeled(job.Unlabeled, obj, cfg.Weight))
	}
	m, res, err := tagger.Fit(context.Background(), job, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	dir := t.TempDir()
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	named, err := kit.LoadTensors(filepath.Join(dir, tagger.WeightsFile), gotch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	defer kit.DropTensors(named)
	return traintest.HostWeights(t, named), res
}

// The ELBO's gradient reaches the encoder: with labeled sentences that
// teach nothing (every tag O and unobserved under drop_o 1, a CRF loss of
// exactly 0), the encoder's weights after a step move with the objective
// and stay where they started without it.
func TestELBOGradientReachesEncoder(t *testing.T) {
	allO := untagged()
	for i, s := range allO.Sentences {
		allO.Sentences[i].Tags = slices.Repeat([]string{"O"}, len(s.Tokens))
	}
	job := tinyJob(allO, untagged(), 1)
	job.Run.DropO = 1
	without, _ := fit(t, job, nil)
	for _, gen := range Generators {
		cfg := tinyConfig(gen)
		with, _ := fit(t, job, &cfg)
		for _, name := range []string{"lstm_w_ih_l0", "lstm_w_hh_l0_reverse", "char_conv_w", "word_emb", "emit_w", "crf_trans"} {
			w, wo := with[name], without[name]
			if w == nil || wo == nil {
				t.Fatalf("no weights %s among %d", name, len(with))
			}
			if slices.Equal(w, wo) {
				t.Errorf("%s: %s did not move with the ELBO", gen, name)
			}
		}
	}
	// The control learns nothing: its CRF loss is exactly 0, and so is
	// its gradient.
	if _, res := fit(t, job, nil); res.Epochs[0].TrainLoss != 0 {
		t.Errorf("CRF loss %v on unobserved tags, want 0", res.Epochs[0].TrainLoss)
	}
}

// Training lowers the loss (CRF loss plus the negative ELBO) on the tiny
// fixture, with either generator, and the model is a working tagger.
func TestTrainingLowersLoss(t *testing.T) {
	labeled := traintest.Corpus(traintest.Fixture[:4])
	for _, gen := range Generators {
		cfg := tinyConfig(gen)
		_, res := fit(t, tinyJob(labeled, untagged(), 12), &cfg)
		first, last := res.Epochs[0].TrainLoss, res.Epochs[len(res.Epochs)-1].TrainLoss
		t.Logf("%s: loss %.3f -> %.3f", gen, first, last)
		if !(last < 0.9*first) {
			t.Errorf("%s: loss %.3f after %d epochs, %.3f after the first", gen, last, len(res.Epochs), first)
		}
	}
}

func TestConfigChecks(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Generator, cfg.GenDim, cfg.Heads = Transformer, 10, 3
	if _, err := NewObjective(cfg, untagged(), 1); err == nil {
		t.Error("gen_dim 10 with 3 heads accepted")
	}
	cfg = DefaultConfig()
	cfg.Generator = "lstm"
	if _, err := NewObjective(cfg, untagged(), 1); err == nil {
		t.Error("generator lstm accepted")
	}
}
