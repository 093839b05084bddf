package encoder

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/kit"
	"github.com/nerflow/nerflow/predict"
	"github.com/nerflow/nerflow/train/internal/traintest"
	"github.com/nerflow/nerflow/train/tagger"
)

// Fine-tuning under the tagger (tagger.Encoder): the encoder of the tiny
// preset, its vocabulary from the tagger tests' fixture, under a tiny
// tagger.

func tinyEncoder(t *testing.T, c *corpus.Corpus) *Model {
	t.Helper()
	var text [][]string
	for _, s := range c.Sentences {
		text = append(text, s.Tokens)
	}
	cfg, err := Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(cfg, NewVocab(text, 0, 1), nil, 3, gotch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func tinyTagger(head, scheme, placement string) tagger.Config {
	return tagger.Config{Scheme: scheme, Head: head, WordDim: 12, CharDim: 6, CharFilters: 8, CharKernel: 3, MaxWordLen: 12,
		CasingDim: 4, Hidden: 10, Layers: 1, Dropout: 0.1, MaxSpan: 4, EncoderPlacement: placement}
}

func tinyRun(loss string) tagger.TrainConfig {
	cfg := tagger.DefaultTrainConfig()
	cfg.Loss, cfg.Epochs, cfg.BatchSize, cfg.LearningRate, cfg.EncoderLearningRate, cfg.Seed = loss, 10, 4, 0.02, 2e-3, 7
	return cfg
}

// fineTune trains a tagger over a fresh tiny encoder on the fixture; the
// tagger owns the encoder, which the test gets back to look at.
// With loss kl, the soft targets are the one-hot gold tags.
func fineTune(t *testing.T, c *corpus.Corpus, model tagger.Config, run tagger.TrainConfig) (*tagger.Tagger, *Model, *tagger.Result) {
	t.Helper()
	job := tagger.Job{Train: c, Model: model, Run: run, Device: gotch.CPU, MinWordCount: 1}
	if run.Loss == tagger.LossKL {
		job.Soft = oneHot(t, c, model.Scheme)
	}
	enc := tinyEncoder(t, c)
	job.Encoder = enc
	m, res, err := tagger.Fit(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m, enc, res
}

// TestFineTuningLowersLossAndRoundTrips trains a tagger with the encoder
// under its BiLSTM and in its place, under every head and a loss of each
// (three for the token head, two for the CRF): the last epoch's loss is at least 40% below the first's, and the
// saved tagger (its encoder fine-tuned, in its own directory) predicts
// exactly as the trained one, loaded without the encoder it started from.
func TestFineTuningLowersLossAndRoundTrips(t *testing.T) {
	c := traintest.Corpus(traintest.Fixture)
	for _, tc := range []struct{ head, scheme, loss string }{
		{tagger.TokenHead, "io", tagger.LossCE},
		{tagger.TokenHead, "io", tagger.LossGCE},
		{tagger.TokenHead, "io", tagger.LossKL},
		{tagger.CRFHead, "bio", tagger.LossCRF},
		{tagger.CRFHead, "bio", tagger.LossPartial},
		{tagger.SpanHead, "bio", tagger.LossNegSample},
		{tagger.TieBreakHead, "bio", tagger.LossTieBreak},
	} {
		for _, placement := range []string{tagger.EncoderUnder, tagger.EncoderReplace} {
			t.Run(tc.head+"-"+tc.loss+"-"+placement, func(t *testing.T) {
				run := tinyRun(tc.loss)
				if tc.loss == tagger.LossPartial {
					run.LossParams = map[string]any{"miss_rate": 0.1}
				}
				m, _, res := fineTune(t, c, tinyTagger(tc.head, tc.scheme, placement), run)
				first, last := res.Epochs[0].TrainLoss, res.Epochs[len(res.Epochs)-1].TrainLoss
				if !(last < 0.6*first) {
					t.Fatalf("loss went from %.4f to %.4f, want it down by 40%%", first, last)
				}
				before, err := m.Predict(c, 3)
				if err != nil {
					t.Fatal(err)
				}
				dir := filepath.Join(t.TempDir(), "tagger")
				if err := m.Save(dir); err != nil {
					t.Fatal(err)
				}
				loaded, err := tagger.LoadModel(dir, gotch.CPU)
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
			})
		}
	}
}

// oneHot are the gold tags of c, in scheme, as soft targets (tagger.WithSoftTargets).
func oneHot(t *testing.T, c *corpus.Corpus, scheme string) [][][]float32 {
	t.Helper()
	sch, err := corpus.ParseScheme(scheme)
	if err != nil {
		t.Fatal(err)
	}
	types, err := tagger.TypesOf(c)
	if err != nil {
		t.Fatal(err)
	}
	labels, err := tagger.NewLabels(sch, types)
	if err != nil {
		t.Fatal(err)
	}
	var out [][][]float32
	for _, s := range c.Sentences {
		tags, err := corpus.Convert(s.Tags, corpus.AnyScheme, sch)
		if err != nil {
			t.Fatal(err)
		}
		var rows [][]float32
		for _, tag := range tags {
			i, ok := labels.Index(tag)
			if !ok {
				t.Fatalf("tag %s not in %v", tag, labels.Tags)
			}
			row := make([]float32, len(labels.Tags))
			row[i] = 1
			rows = append(rows, row)
		}
		out = append(out, rows)
	}
	return out
}

// hasGradient says whether the weight has a gradient with a non-zero entry.
func hasGradient(t *testing.T, x *ts.Tensor) bool {
	t.Helper()
	var nonzero bool
	if err := kit.Guard(func() {
		g, err := x.Grad(false)
		if err != nil {
			kit.Abort(err)
		}
		defer g.MustDrop()
		if ok, _ := g.Defined(); !ok {
			return
		}
		for _, v := range kit.Float32s(g) {
			if v != 0 {
				nonzero = true
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	return nonzero
}

// TestFineTuningStepsEachGroupAtItsRate takes one training step on the
// whole fixture at learning rate 0.01 for the tagger and 0.001 for the
// encoder, without warm-up. Adam's first step moves an entry with gradient
// g by lr·g/(|g|+1e-8): by its group's rate, whatever the gradient's size.
// So no encoder entry moves by more than 0.001 and the largest move is
// 0.001, and likewise 0.01 for the tagger's own weights. The gradient of
// the loss reaches the encoder's weights; with an encoder learning rate of
// 0, the encoder stays frozen: no gradient, not one entry changed, while
// the tagger's weights still learn.
func TestFineTuningStepsEachGroupAtItsRate(t *testing.T) {
	c := traintest.Corpus(traintest.Fixture)
	for _, tc := range []struct {
		placement string
		encLR     float64
	}{{tagger.EncoderUnder, 1e-3}, {tagger.EncoderReplace, 1e-3}, {tagger.EncoderUnder, 0}, {tagger.EncoderReplace, 0}} {
		t.Run(tc.placement+"-"+map[bool]string{true: "frozen", false: "tuned"}[tc.encLR == 0], func(t *testing.T) {
			const lr = 1e-2
			run := tinyRun(tagger.LossCE)
			run.Epochs, run.BatchSize, run.Warmup, run.EncoderWarmup = 1, len(c.Sentences), 0, 0
			run.LearningRate, run.EncoderLearningRate = lr, tc.encLR
			enc := tinyEncoder(t, c)
			m := newTagger(t, c, tinyTagger(tagger.TokenHead, "io", tc.placement), enc)
			encBefore, ownBefore := traintest.HostWeights(t, enc.named()), traintest.HostWeights(t, ownWeights(m))
			tr, err := tagger.NewTrainer(m, run)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tr.Run(context.Background(), c, nil); err != nil {
				t.Fatal(err)
			}
			encMove := traintest.LargestMove(encBefore, traintest.HostWeights(t, enc.named()))
			ownMove := traintest.LargestMove(ownBefore, traintest.HostWeights(t, ownWeights(m)))
			near := func(what string, got, want float64) {
				t.Helper()
				if math.Abs(got-want) > 1e-3*want+1e-6 {
					t.Errorf("%s moved by at most %.8g, want %.8g", what, got, want)
				}
			}
			near("the tagger's weights", ownMove, lr)
			qkv := enc.layers[0].qkvW
			if tc.encLR == 0 {
				if encMove != 0 {
					t.Errorf("a frozen encoder's weights moved by up to %g", encMove)
				}
				if hasGradient(t, qkv) {
					t.Error("a frozen encoder's weights have a gradient")
				}
				return
			}
			near("the encoder's weights", encMove, tc.encLR)
			if !hasGradient(t, qkv) {
				t.Error("the encoder's attention weights got no gradient")
			}
		})
	}
}

// ownWeights are a tagger's weights without its encoder's.
func ownWeights(m *tagger.Tagger) []ts.NamedTensor {
	var out []ts.NamedTensor
	for _, nt := range m.Weights() {
		if !strings.HasPrefix(nt.Name, tagger.EncoderWeightPrefix) {
			out = append(out, nt)
		}
	}
	return out
}

// newTagger builds a tiny tagger over enc, which it owns, for the fixture.
func newTagger(t *testing.T, c *corpus.Corpus, cfg tagger.Config, enc *Model) *tagger.Tagger {
	t.Helper()
	labels, err := tagger.NewLabels(corpus.IO, []string{"LOC", "PER"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := tagger.NewTagger(cfg, tagger.NewVocab(c, nil, tagger.MinWordCount(1)), labels, nil, 5, gotch.CPU, tagger.WithEncoder(enc))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// TestFineTuningResumesAndContinues: a fine-tuning run stopped after its
// second epoch and resumed from that checkpoint, by a tagger and an encoder
// of other initial weights, ends with the weights of the uninterrupted run,
// the encoder's included (its weights and moments are in the checkpoint).
// The saved tagger, loaded back, fine-tunes its encoder further, as the
// self-training stages do with the model they load.
func TestFineTuningResumesAndContinues(t *testing.T) {
	c := traintest.Corpus(traintest.Fixture)
	run := tinyRun(tagger.LossCE)
	run.Epochs = 4
	cfg := tinyTagger(tagger.TokenHead, "io", tagger.EncoderUnder)
	whole := newTagger(t, c, cfg, tinyEncoder(t, c))
	tr, err := tagger.NewTrainer(whole, run)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Run(context.Background(), c, nil); err != nil {
		t.Fatal(err)
	}

	saved, stop := t.TempDir(), errors.New("stop")
	first := newTagger(t, c, cfg, tinyEncoder(t, c))
	tr, err = tagger.NewTrainer(first, run, tagger.WithCheckpoints(t.TempDir(), func(dir string, epoch int) error {
		if epoch < 2 {
			return nil
		}
		if err := os.CopyFS(saved, os.DirFS(dir)); err != nil {
			return err
		}
		return stop
	}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Run(context.Background(), c, nil); !errors.Is(err, stop) {
		t.Fatalf("the interrupted run: error %v", err)
	}
	ref := tinyEncoder(t, c)
	ref.Close()
	other, err := New(ref.Config, ref.Vocab, nil, 99, gotch.CPU) // the same vocabulary, other weights
	if err != nil {
		t.Fatal(err)
	}
	labels, _ := tagger.NewLabels(corpus.IO, []string{"LOC", "PER"})
	resumed, err := tagger.NewTagger(cfg, tagger.NewVocab(c, nil, tagger.MinWordCount(1)), labels, nil, 99, gotch.CPU, tagger.WithEncoder(other))
	if err != nil {
		t.Fatal(err)
	}
	defer resumed.Close()
	tr, err = tagger.NewTrainer(resumed, run, tagger.Resume(saved))
	if err != nil {
		t.Fatal(err)
	}
	res, err := tr.Run(context.Background(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Resumed != 2 {
		t.Fatalf("resumed %d epochs, want 2", res.Resumed)
	}
	want, got := traintest.HostWeights(t, whole.Weights()), traintest.HostWeights(t, resumed.Weights())
	var encoderWeights int
	for name, w := range want {
		if !slices.Equal(w, got[name]) {
			t.Fatalf("%s differs between the resumed and the uninterrupted run", name)
		}
		if strings.HasPrefix(name, tagger.EncoderWeightPrefix) {
			encoderWeights++
		}
	}
	if encoderWeights == 0 || len(got) != len(want) {
		t.Fatalf("%d weights (%d of the encoder), the uninterrupted run has %d", len(got), encoderWeights, len(want))
	}

	dir := filepath.Join(t.TempDir(), "tagger")
	if err := whole.Save(dir); err != nil {
		t.Fatal(err)
	}
	loaded, err := tagger.Load(dir, gotch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	defer loaded.Close()
	before := traintest.HostWeights(t, loaded.Weights())
	run.Epochs = 1
	tr, err = tagger.NewTrainer(loaded, run)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Run(context.Background(), c, nil); err != nil {
		t.Fatal(err)
	}
	after := traintest.HostWeights(t, loaded.Weights())
	moved := 0.0
	for name, w := range before {
		if strings.HasPrefix(name, tagger.EncoderWeightPrefix) {
			moved = max(moved, traintest.LargestMove(map[string][]float32{name: w}, after))
		}
	}
	if moved == 0 {
		t.Error("the loaded tagger's encoder did not learn")
	}
}

// TestServingLoadsAFineTunedTagger: the loader of nerflow serve and
// predict.entities (package predict) loads a fine-tuned tagger from its
// directory alone and finds the entities the trained tagger predicts.
func TestServingLoadsAFineTunedTagger(t *testing.T) {
	c := traintest.Corpus(traintest.Fixture)
	m, _, _ := fineTune(t, c, tinyTagger(tagger.TokenHead, "io", tagger.EncoderUnder), tinyRun(tagger.LossCE))
	want, err := m.Predict(c, 4)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "tagger")
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	served, err := predict.LoadDir(dir, gotch.CPU, predict.Info{Name: "finetuned"})
	if err != nil {
		t.Fatal(err)
	}
	defer served.Close()
	var req predict.Request
	for _, s := range c.Sentences {
		req.Sentences = append(req.Sentences, s.Tokens)
	}
	resp, err := served.Annotate(req, 4)
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for i, r := range resp.Results {
		spans, err := corpus.IO.Spans(want[i].Tags)
		if err != nil {
			t.Fatal(err)
		}
		var got []corpus.Span
		for _, e := range r.Entities {
			got = append(got, corpus.Span{Start: e.TokenStart, End: e.TokenEnd, Label: e.Type})
		}
		if !slices.Equal(got, spans) {
			t.Errorf("sentence %d: served %v, the trained tagger %v", i+1, got, spans)
		}
		found += len(spans)
	}
	if found == 0 {
		t.Error("the trained tagger found no entity: nothing compared")
	}
}
