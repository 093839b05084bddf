package tagger

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/kit"
	"github.com/nerflow/nerflow/train/internal/traintest"
)

// fixture is a tiny labeled corpus: "token/TAG" words, O when untagged.
var (
	fixture       = traintest.Fixture
	fixtureCorpus = traintest.Corpus
)

func tinyConfig(head, scheme string) Config {
	return Config{Scheme: scheme, Head: head, WordDim: 12, CharDim: 6, CharFilters: 8, CharKernel: 3, MaxWordLen: 12,
		CasingDim: 4, Hidden: 10, Layers: 1, Dropout: 0.1}
}

func newTiny(t *testing.T, c *corpus.Corpus, cfg Config, seed uint64) *Tagger {
	t.Helper()
	scheme, err := corpus.ParseScheme(cfg.Scheme)
	if err != nil {
		t.Fatal(err)
	}
	labels, err := NewLabels(scheme, []string{"PER", "LOC"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewTagger(cfg, NewVocab(c, nil, MinWordCount(1)), labels, nil, seed, gotch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

func tinyTrainConfig(loss string) TrainConfig {
	cfg := DefaultTrainConfig()
	cfg.Loss, cfg.Epochs, cfg.BatchSize, cfg.LearningRate, cfg.Seed = loss, 8, 4, 0.02, 7
	return cfg
}

// TestTrainingLowersLossAndRoundTrips is the gotch smoke test: a tiny
// BiLSTM tagger trained for a few steps on the CPU lowers its loss, and
// saving and loading its weights reproduces its predictions exactly.
func TestTrainingLowersLossAndRoundTrips(t *testing.T) {
	c := fixtureCorpus(fixture)
	for _, tc := range []struct{ head, scheme, loss string }{
		{TokenHead, "io", LossCE},
		{TokenHead, "io", LossGCE},
		{CRFHead, "bio", LossCRF},
		{CRFHead, "bioes", LossCRF},
	} {
		t.Run(tc.head+"-"+tc.scheme+"-"+tc.loss, func(t *testing.T) {
			m := newTiny(t, c, tinyConfig(tc.head, tc.scheme), 1)
			checkLossFalls(t, m, tinyTrainConfig(tc.loss), c)
			before, err := m.Predict(c, 3)
			if err != nil {
				t.Fatal(err)
			}
			checkRoundTrip(t, m, c, before)
		})
	}
}

// checkLossFalls trains m with cfg on c: the last epoch's loss is at
// least 40% below the first's.
func checkLossFalls(t *testing.T, m *Tagger, cfg TrainConfig, c *corpus.Corpus) {
	t.Helper()
	tr, err := NewTrainer(m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := tr.Run(context.Background(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	first, last := res.Epochs[0].TrainLoss, res.Epochs[len(res.Epochs)-1].TrainLoss
	if !(last < 0.6*first) {
		t.Fatalf("loss went from %.4f to %.4f, want it down by 40%%", first, last)
	}
}

// checkRoundTrip saves m and loads it back: the loaded tagger predicts c
// exactly as m did (before).
func checkRoundTrip(t *testing.T, m *Tagger, c *corpus.Corpus, before []Prediction) {
	t.Helper()
	dir := t.TempDir()
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	loaded, err := Load(dir, gotch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	defer loaded.Close()
	after, err := loaded.Predict(c, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := dataset.SamePredictions(before, after); err != nil {
		t.Fatalf("before saving and after loading: %v", err)
	}
}

// TestTrainingIsReproducible: the same seed gives the same weights, on a
// goroutine of its own each time (as a worker runs trainings).
func TestTrainingIsReproducible(t *testing.T) {
	c := fixtureCorpus(fixture)
	weightsAfter := func(seed uint64) []float32 {
		m := newTiny(t, c, tinyConfig(TokenHead, "io"), seed)
		cfg := tinyTrainConfig(LossGCE)
		cfg.Epochs, cfg.DropO = 2, 0.3
		cfg.SetLossParam("update_interval", 2)
		tr, err := NewTrainer(m, cfg)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error)
		go func() {
			_, err := tr.Run(context.Background(), c, nil)
			done <- err
		}()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		var all []float32
		for _, w := range m.namedWeights() {
			all = append(all, kit.Float32s(w.Tensor)...)
		}
		return all
	}
	a, b, other := weightsAfter(3), weightsAfter(3), weightsAfter(4)
	if !slices.Equal(a, b) {
		t.Fatal("two runs with seed 3 ended with different weights")
	}
	if slices.Equal(a, other) {
		t.Fatal("seeds 3 and 4 ended with the same weights")
	}
}

// TestResumeContinuesExactly: a run stopped after its second epoch and
// resumed from the checkpoint ends with the weights of an uninterrupted run.
func TestResumeContinuesExactly(t *testing.T) {
	c := fixtureCorpus(fixture)
	cfg := tinyTrainConfig(LossGCE)
	cfg.Epochs, cfg.DropO = 4, 0.2
	cfg.SetLossParam("update_interval", 3)
	dev := fixtureCorpus(fixture[:4])

	whole := newTiny(t, c, tinyConfig(TokenHead, "io"), 5)
	tr, _ := NewTrainer(whole, cfg)
	wantRes, err := tr.Run(context.Background(), c, dev)
	if err != nil {
		t.Fatal(err)
	}

	// The interrupted run: a checkpoint callback that keeps a copy of the
	// state after epoch 2 and then fails, as a dying worker would.
	saved := t.TempDir()
	first := newTiny(t, c, tinyConfig(TokenHead, "io"), 5)
	tr, _ = NewTrainer(first, cfg, WithCheckpoints(t.TempDir(), func(dir string, epoch int) error {
		if epoch < 2 {
			return nil
		}
		return copyDir(dir, saved)
	}))
	ctx, cancel := context.WithCancel(context.Background())
	tr.fit.Progress = func(p Progress) {
		if p.Epoch == 3 {
			cancel()
		}
	}
	if _, err := tr.Run(ctx, c, dev); err == nil {
		t.Fatal("the interrupted run did not stop")
	}

	resumed := newTiny(t, c, tinyConfig(TokenHead, "io"), 99) // weights come from the checkpoint
	tr, _ = NewTrainer(resumed, cfg, Resume(saved))
	res, err := tr.Run(context.Background(), c, dev)
	if err != nil {
		t.Fatal(err)
	}
	if res.Resumed != 2 || len(res.Epochs) != 4 || res.Steps != wantRes.Steps || res.BestEpoch != wantRes.BestEpoch {
		t.Fatalf("resumed run: %+v, uninterrupted: %+v", res, wantRes)
	}
	for i, w := range whole.namedWeights() {
		if !slices.Equal(kit.Float32s(w.Tensor), kit.Float32s(resumed.namedWeights()[i].Tensor)) {
			t.Fatalf("weight %s differs between the resumed and the uninterrupted run", w.Name)
		}
	}
}

func copyDir(src, dst string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Entities of unknown type ("?", from untyped gazetteers) train both heads,
// ignored by default or as entities of some type.
func TestUnknownTypeTags(t *testing.T) {
	lines := append(slices.Clone(fixture), "Zorg/B-? Blip/I-? visited Paris/B-LOC .", "Quux/B-? met Anna/B-PER .")
	c := fixtureCorpus(lines)
	for _, tc := range []struct{ head, scheme, loss string }{{TokenHead, "io", LossGCE}, {CRFHead, "bioes", LossCRF}} {
		for _, asEntity := range []bool{false, true} {
			m := newTiny(t, c, tinyConfig(tc.head, tc.scheme), 1)
			cfg := tinyTrainConfig(tc.loss)
			cfg.Epochs, cfg.UnknownAsEntity = 2, asEntity
			tr, err := NewTrainer(m, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tr.Run(context.Background(), c, nil); err != nil {
				t.Fatalf("%s, unknown as entity %v: %v", tc.head, asEntity, err)
			}
		}
	}
	m := newTiny(t, c, tinyConfig(TokenHead, "io"), 1)
	exs, err := m.encodeCorpus(fixtureCorpus(lines[len(lines)-1:]), true)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(exs[0].targets, []int32{anyEntity, 0, 1, 0}) {
		t.Fatalf("targets %v", exs[0].targets)
	}
	ignoreUnknown(exs)
	if !slices.Equal(exs[0].targets, []int32{ignored, 0, 1, 0}) {
		t.Fatalf("targets after ignoreUnknown %v", exs[0].targets)
	}
}

// Distillation: a student trained with loss kl on a teacher's predicted
// distributions comes to agree with the teacher.
func TestSoftTargetsDistill(t *testing.T) {
	c := fixtureCorpus(fixture)
	teacher := newTiny(t, c, tinyConfig(TokenHead, "io"), 1)
	tr, err := NewTrainer(teacher, tinyTrainConfig(LossCE))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Run(context.Background(), c, nil); err != nil {
		t.Fatal(err)
	}
	preds, err := teacher.Predict(c, 4)
	if err != nil {
		t.Fatal(err)
	}
	soft := make([][][]float32, len(preds))
	for i, p := range preds {
		soft[i] = p.Probs
	}
	untagged := &corpus.Corpus{}
	for _, s := range c.Sentences {
		untagged.Sentences = append(untagged.Sentences, corpus.Sentence{Tokens: s.Tokens})
	}

	// Mean total variation distance between the teacher's and a model's
	// distributions.
	distance := func(m *Tagger) float64 {
		got, err := m.Predict(c, 4)
		if err != nil {
			t.Fatal(err)
		}
		d, n := 0.0, 0
		for i := range got {
			for tok, row := range got[i].Probs {
				for j, p := range row {
					d += math.Abs(float64(p-preds[i].Probs[tok][j])) / 2
				}
				n++
			}
		}
		return d / float64(n)
	}
	student := newTiny(t, c, tinyConfig(TokenHead, "io"), 2)
	before := distance(student)
	cfg := tinyTrainConfig(LossKL)
	cfg.Epochs = 15
	if _, err := NewTrainer(student, cfg); err == nil {
		t.Fatal("loss kl without soft targets accepted")
	}
	tr, err = NewTrainer(student, cfg, WithSoftTargets(soft))
	if err != nil {
		t.Fatal(err)
	}
	res, err := tr.Run(context.Background(), untagged, nil)
	if err != nil {
		t.Fatal(err)
	}
	if first, last := res.Epochs[0].TrainLoss, res.Epochs[len(res.Epochs)-1].TrainLoss; !(last < 0.5*first) {
		t.Fatalf("kl went from %.4f to %.4f", first, last)
	}
	after := distance(student)
	t.Logf("distance to the teacher's distributions: %.4f before, %.4f after", before, after)
	if !(after < 0.25*before) {
		t.Fatalf("the distance did not shrink enough")
	}

	bad := slices.Clone(soft)
	bad[0] = bad[0][1:]
	tr, _ = NewTrainer(newTiny(t, c, tinyConfig(TokenHead, "io"), 2), cfg, WithSoftTargets(bad))
	if _, err := tr.Run(context.Background(), untagged, nil); err == nil || !strings.Contains(err.Error(), "sentence 1") {
		t.Fatalf("misaligned soft targets: %v", err)
	}
}
