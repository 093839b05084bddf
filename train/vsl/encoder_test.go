package vsl

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/train/encoder"
	"github.com/nerflow/nerflow/train/internal/traintest"
	"github.com/nerflow/nerflow/train/tagger"
)

// tinyEncoder is an untrained encoder of the tiny preset over the
// fixture's words.
func tinyEncoder(t *testing.T, c *corpus.Corpus) *encoder.Model {
	t.Helper()
	var text [][]string
	for _, s := range c.Sentences {
		text = append(text, s.Tokens)
	}
	cfg, err := encoder.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	m, err := encoder.New(cfg, encoder.NewVocab(text, 0, 1), nil, 3, gotch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestFineTunedEncoder trains the hierarchical VSL with a tiny encoder
// fine-tuned under its BiGRU, on the fixture labeled and as unlabeled text:
// the classification loss falls, the encoder's weights learn (at most its
// own rate per step), and the saved model, its encoder in encoder/, loads
// without the encoder it started from and predicts as the trained one did.
// With an encoder learning rate of 0, the encoder stays as it was.
func TestFineTunedEncoder(t *testing.T) {
	c := traintest.Corpus(traintest.Fixture)
	for _, encLR := range []float64{2e-3, 0} {
		h := tinyHyperparams(Hier)
		h.Run.EncoderLearningRate = encLR
		enc := tinyEncoder(t, c)
		before := traintest.HostWeights(t, enc.Weights())
		m, res, err := Fit(context.Background(), Job{Labeled: c, Unlabeled: c, Table: fixtureTable(t), Hyper: h, Device: gotch.CPU, Encoder: enc}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		if m.Config.EncoderDim != enc.StateDim() {
			t.Fatalf("encoder_dim %d, want %d", m.Config.EncoderDim, enc.StateDim())
		}
		first, last := res.Epochs[0], res.Epochs[len(res.Epochs)-1]
		if !(last.Class < first.Class) {
			t.Errorf("classification loss %v after %d epochs, %v after the first", last.Class, len(res.Epochs), first.Class)
		}
		moved := traintest.LargestMove(before, traintest.HostWeights(t, enc.Weights()))
		steps := float64(res.Steps)
		switch {
		case encLR == 0 && moved != 0:
			t.Errorf("a frozen encoder moved by up to %g", moved)
		case encLR > 0 && (moved == 0 || moved > encLR*steps*1.001):
			t.Errorf("the fine-tuned encoder moved by up to %g in %v steps at a rate of at most %g", moved, steps, encLR)
		}

		dir := filepath.Join(t.TempDir(), "vsl")
		if err := m.Save(dir); err != nil {
			t.Fatal(err)
		}
		loaded, err := tagger.LoadModel(dir, gotch.CPU) // as train.predict and train.evaluate load it
		if err != nil {
			t.Fatal(err)
		}
		defer loaded.Close()
		p1, err := m.Predict(c, 4)
		if err != nil {
			t.Fatal(err)
		}
		p2, err := loaded.Predict(c, 4)
		if err != nil {
			t.Fatal(err)
		}
		if err := dataset.SamePredictions(p1, p2); err != nil {
			t.Fatalf("before saving and after loading: %v", err)
		}
	}

	// A model built for an encoder does not load without one.
	h := tinyHyperparams(Hier)
	h.Model.EncoderDim = 64
	labels, _ := tagger.NewLabels(corpus.BIO, []string{"PER", "LOC"})
	if _, err := New(h.Model, labels, tagger.NewVocab(c, fixtureTable(t), tagger.MinWordCount(math.MaxInt)), nil, 1, gotch.CPU); err == nil || !strings.Contains(err.Error(), "no encoder") {
		t.Errorf("encoder_dim without an encoder: error %v", err)
	}
}
