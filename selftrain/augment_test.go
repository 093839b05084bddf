package selftrain

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/augment"
	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/train/encoder"
	"github.com/nerflow/nerflow/train/lm"
	"github.com/nerflow/nerflow/train/tagger"
)

// tinyLM trains tiny language models on the fixture's tokens.
func tinyLM(t *testing.T) *lm.Model {
	t.Helper()
	var text [][]string
	for _, s := range fixtureCorpus().Sentences {
		text = append(text, s.Tokens)
	}
	m, err := lm.New(lm.Config{Dim: 4, Hidden: 6, Layers: 1}, lm.NewVocab(text, 0, 1), 5, gotch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	cfg := lm.DefaultTrainConfig()
	cfg.Epochs, cfg.BatchSize = 3, 2
	if _, err := lm.Train(context.Background(), m, text, nil, cfg, lm.Options{StateDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	return m
}

// tinyEncoder is an untrained encoder of the tiny preset over the
// fixture's tokens: a masked LM whose head draws replacements too.
func tinyEncoder(t *testing.T) *encoder.Model {
	t.Helper()
	var text [][]string
	for _, s := range fixtureCorpus().Sentences {
		text = append(text, s.Tokens)
	}
	cfg, err := encoder.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	m, err := encoder.New(cfg, encoder.NewVocab(text, 0, 1), nil, 5, gotch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// TestAugmentedSelfTrainingLowersLoss: with augmented sentences (a new
// augmentation every epoch) and fixed targets, the loss goes down, whether
// the replacements come from the LSTM language models or from an
// encoder's masked-LM head.
func TestAugmentedSelfTrainingLowersLoss(t *testing.T) {
	for name, model := range map[string]func(*testing.T) augment.MaskedLM{
		"lstm":    func(t *testing.T) augment.MaskedLM { return tinyLM(t) },
		"encoder": func(t *testing.T) augment.MaskedLM { return tinyEncoder(t) },
	} {
		t.Run(name, func(t *testing.T) { checkAugmentedSelfTraining(t, model(t)) })
	}
}

func checkAugmentedSelfTraining(t *testing.T, model augment.MaskedLM) {
	m := tinyTagger(t)
	c := fixtureCorpus()
	var logs bytes.Buffer
	acfg := augment.DefaultConfig()
	acfg.Rate = 0.5 // the fixture's sentences are short
	aug := WithAugmentation(model, c, acfg, slog.New(slog.NewTextHandler(&logs, nil)))
	cfg := tinySelfTraining(5, 1000)
	cfg.Targets.Threshold = 0 // the tiny tagger is not confident: every token's types count
	res, err := Train(context.Background(), m, c, nil, cfg, aug)
	if err != nil {
		t.Fatal(err)
	}
	first, last := res.Epochs[0].TrainLoss, res.Epochs[len(res.Epochs)-1].TrainLoss
	if !(last < first) || math.IsNaN(last) {
		t.Errorf("self-training loss with augmentation from %v to %v, want lower", first, last)
	}
	if n := strings.Count(logs.String(), "augmented sentences"); n != 5 || !regexp.MustCompile(`replaced=[1-9]`).MatchString(logs.String()) {
		t.Errorf("%d augmentations for 5 epochs, or no token replaced:\n%s", n, logs.String())
	}
	t.Logf("augmented self-training loss %v -> %v over %d steps", first, last, res.Steps)
}

// TestAugmentedTermIsTheOriginalsTypeTerm: the loss of the first step is
// E + T without augmentation (entity term E, type term T), E with the type
// targets left out, and E + 2T when the augmentation is the sentences
// themselves: the augmented sentences are fitted to the type targets of
// their originals, and to nothing else.
func TestAugmentedTermIsTheOriginalsTypeTerm(t *testing.T) {
	dir := t.TempDir()
	if err := tinyTagger(t).Save(dir); err != nil {
		t.Fatal(err)
	}
	c := fixtureCorpus()
	firstLoss := func(noTypes bool, opts ...tagger.TrainerOption) float64 {
		t.Helper()
		m, err := tagger.Load(dir, gotch.CPU)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		preds, err := m.Predict(c, 64)
		if err != nil {
			t.Fatal(err)
		}
		probs := make([][][]float32, len(preds))
		for i, p := range preds {
			probs[i] = p.Probs
		}
		// Every token's types count: the tiny tagger is not confident.
		soft, err := SoftLabels(probs, Targets{Threshold: 0, Entity: EntityHard})
		if err != nil {
			t.Fatal(err)
		}
		if noTypes {
			for _, s := range soft {
				for _, row := range s {
					clear(row[1:])
				}
			}
		}
		cfg := tinySelfTraining(1, 1000)
		cfg.Run.BatchSize = len(c.Sentences) // one step
		loss := math.NaN()
		opts = append(opts, tagger.WithSoftTargets(soft), tagger.WithProgress(func(p tagger.Progress) {
			if p.Step == 1 {
				loss = p.Loss
			}
		}))
		tr, err := tagger.NewTrainer(m, cfg.Run, opts...)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tr.Run(context.Background(), c, nil); err != nil {
			t.Fatal(err)
		}
		return loss
	}
	same := tagger.WithAugmented(func(int) ([]corpus.Sentence, error) { return c.Sentences, nil })
	e, et, e2t := firstLoss(true), firstLoss(false), firstLoss(false, same)
	if typ := et - e; !(typ > 1e-4) || math.Abs(e2t-et-typ) > 1e-4 {
		t.Errorf("first-step losses: E %v, E+T %v, with the identical augmentation %v, want E+2T = %v", e, et, e2t, et+typ)
	}
	t.Logf("first-step losses: E %v, E+T %v, E+2T %v", e, et, e2t)
}

// TestMisalignedAugmentation: an augmentation that drops a token is an
// error naming the sentence.
func TestMisalignedAugmentation(t *testing.T) {
	m := tinyTagger(t)
	c := fixtureCorpus()
	short := tagger.WithAugmented(func(int) ([]corpus.Sentence, error) {
		out := append([]corpus.Sentence(nil), c.Sentences...)
		out[1].Tokens = out[1].Tokens[1:]
		return out, nil
	})
	_, err := Train(context.Background(), m, c, nil, tinySelfTraining(1, 1000), short)
	if err == nil || !strings.Contains(err.Error(), "augmented sentence 2") {
		t.Errorf("error %v, want one about augmented sentence 2", err)
	}
}
