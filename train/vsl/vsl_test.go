package vsl

import (
	"context"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/embeddings"
	"github.com/nerflow/nerflow/kit"
	"github.com/nerflow/nerflow/train/internal/traintest"
	"github.com/nerflow/nerflow/train/tagger"
)

// fixtureTable gives every lower-cased word of the fixture a vector of
// dimension 8 drawn from a fixed seed, and holds one word ("lisbon") that
// the fixture lacks.
func fixtureTable(t *testing.T) *embeddings.Table {
	t.Helper()
	var words []string
	for _, s := range traintest.Corpus(traintest.Fixture).Sentences {
		for _, tok := range s.Tokens {
			if k := embeddings.Key(tok); !slices.Contains(words, k) {
				words = append(words, k)
			}
		}
	}
	words = append(words, "lisbon")
	const dim = 8
	rng := rand.New(rand.NewPCG(7, 7))
	vecs := make([]float32, len(words)*dim)
	for i := range vecs {
		vecs[i] = float32(rng.NormFloat64() / 2)
	}
	tab, err := embeddings.NewTable(dim, words, vecs)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// tinyHyperparams is a model small enough to train in a second.
func tinyHyperparams(variant string) Hyperparams {
	h := DefaultHyperparams()
	h.Model.Variant = variant
	h.Model.Hidden, h.Model.YDim, h.Model.ZDim = 16, 8, 8
	h.Model.CharDim, h.Model.CharFilters, h.Model.ReconWords = 6, 8, 40
	h.Model.Dropout = 0
	h.Run.Epochs, h.Run.BatchSize, h.Run.KLWarmup, h.Run.Warmup = 15, 4, 0, 0
	h.Run.LearningRate = 5e-3
	return h
}

// tinyModel builds an untrained model over the fixture.
func tinyModel(t *testing.T, variant string) (*Model, *corpus.Corpus) {
	t.Helper()
	c := traintest.Corpus(traintest.Fixture)
	h := tinyHyperparams(variant)
	labels, err := tagger.NewLabels(corpus.BIO, []string{"PER", "LOC"})
	if err != nil {
		t.Fatal(err)
	}
	vocab := tagger.NewVocab(c, fixtureTable(t), tagger.MinWordCount(math.MaxInt))
	m, err := New(h.Model, labels, vocab, ReconVocab(h.Model.ReconWords, c), 3, gotch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m, c
}

// guard runs f on a locked thread with a fresh graph, failing the test on
// a libtorch error.
func guard(t *testing.T, device gotch.Device, f func(g *kit.Graph)) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	g := kit.NewGraph(device)
	defer g.Free()
	if err := kit.Guard(func() { f(g) }); err != nil {
		t.Fatal(err)
	}
}

// TestKLDiagClosedForm checks the KL terms against values computed by hand
// from KL(N(m1, v1) || N(m2, v2)) = 1/2 [ln(v2/v1) + (v1 + (m1-m2)²)/v2 - 1].
func TestKLDiagClosedForm(t *testing.T) {
	ln2, ln4 := math.Log(2), math.Log(4)
	guard(t, gotch.CPU, func(g *kit.Graph) {
		// To N(0, I), two tokens of two dimensions:
		//   (m 0.5, v 1): 1/2 (1 + 0.25 - 1 - 0)       = 0.125
		//   (m -1,  v 2): 1/2 (2 + 1 - 1 - ln 2)       = 0.6534264
		//   (m 0,   v 1): 0
		//   (m 2,   v 4): 1/2 (4 + 4 - 1 - ln 4)       = 2.8068528
		q := gaussian{mu: g.Floats([]float32{0.5, -1, 0, 2}, 2, 2), logVar: g.Floats([]float32{0, float32(ln2), 0, float32(ln4)}, 2, 2)}
		want := 0.125 + 0.6534264 + 0 + 2.8068528
		if got := value(klDiag(g, q, nil)); math.Abs(got-want) > 1e-5 {
			t.Errorf("KL to N(0, I) = %.7f, want %.7f", got, want)
		}
		// To a conditional prior, one dimension, two tokens:
		//   q (m 1, v 1), p (m 0, v 4): 1/2 (ln 4 + (1 + 1)/4 - 1)  = 0.4431472
		//   q (m 0, v 2), p (m 1, v 1): 1/2 (-ln 2 + (2 + 1)/1 - 1) = 0.6534264
		q2 := gaussian{mu: g.Floats([]float32{1, 0}, 2, 1), logVar: g.Floats([]float32{0, float32(ln2)}, 2, 1)}
		p2 := gaussian{mu: g.Floats([]float32{0, 1}, 2, 1), logVar: g.Floats([]float32{float32(ln4), 0}, 2, 1)}
		if got, want := value(klDiag(g, q2, &p2)), 0.4431472+0.6534264; math.Abs(got-want) > 1e-5 {
			t.Errorf("KL to the conditional prior = %.7f, want %.7f", got, want)
		}
		// A distribution against itself: 0.
		if got := value(klDiag(g, p2, &p2)); math.Abs(got) > 1e-6 {
			t.Errorf("KL(p || p) = %v, want 0", got)
		}
	})
}

func TestKLWeightSchedule(t *testing.T) {
	for _, c := range []struct {
		max          float64
		step, warmup int
		want         float64
	}{
		{1, 0, 4, 0.25}, {1, 1, 4, 0.5}, {1, 3, 4, 1}, {1, 100, 4, 1},
		{2, 1, 4, 1}, {0.5, 0, 0, 0.5}, {0.5, 7, 0, 0.5},
	} {
		if got := KLWeight(c.max, c.step, c.warmup); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("KLWeight(%v, step %d, warmup %d) = %v, want %v", c.max, c.step, c.warmup, got, c.want)
		}
	}
}

// gradNorm is the L2 norm of a parameter's gradient (0 when it has none).
func gradNorm(g *kit.Graph, m *Model, name string) float64 {
	p, err := m.vs.Root().Get(name)
	g.Check(err)
	gr := g.T(p.Grad(false))
	if d, _ := gr.Defined(); !d {
		return 0
	}
	var s float64
	for _, x := range kit.Float32s(gr) {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

// TestELBOGradientReachesEncoder backpropagates the loss of unlabeled
// sentences alone (the negative ELBO): the BiGRU, the character CNN and
// the posteriors get gradients through the reparameterized samples, and
// the classifier, which the ELBO does not use, gets none.
func TestELBOGradientReachesEncoder(t *testing.T) {
	for _, variant := range []string{Flat, Hier} {
		t.Run(variant, func(t *testing.T) {
			m, c := tinyModel(t, variant)
			exs, err := m.encode(c, false)
			if err != nil {
				t.Fatal(err)
			}
			b := newBatch(exs, []int{0, 1, 2})
			if b.labeled != 0 {
				t.Fatalf("unlabeled batch has %d labeled tokens", b.labeled)
			}
			guard(t, gotch.CPU, func(g *kit.Graph) {
				loss, terms := m.batchLoss(g, b, Weights{KL: 1, Class: 1}, rand.New(rand.NewPCG(1, 2)))
				if terms.class != nil {
					t.Fatal("an unlabeled batch has a classification loss")
				}
				g.Check(loss.Backward())
				for _, name := range []string{"gru_w_ih", "gru_w_hh_reverse", "char_conv_w", "q_y_w", "q_z_w", "decoder_w"} {
					if n := gradNorm(g, m, name); !(n > 0) || math.IsInf(n, 0) {
						t.Errorf("gradient of %s has norm %v, want > 0", name, n)
					}
				}
				if n := gradNorm(g, m, "classifier_w"); n != 0 {
					t.Errorf("classifier gets a gradient of norm %v from unlabeled sentences", n)
				}
				if variant == Hier {
					if n := gradNorm(g, m, "p_z_w"); !(n > 0) {
						t.Errorf("conditional prior gets no gradient")
					}
				}
			})
		})
	}
}

// TestLossDecreases trains each variant on the fixture, labeled and as
// unlabeled text: the loss of the last epoch is below the first's, and the
// classification loss falls.
func TestLossDecreases(t *testing.T) {
	c := traintest.Corpus(traintest.Fixture)
	for _, variant := range []string{Flat, Hier} {
		t.Run(variant, func(t *testing.T) {
			h := tinyHyperparams(variant)
			if variant == Flat {
				h.Model.Classify = ClassifySample // the paper's; hier covers the default
			}
			m, res, err := Fit(context.Background(), Job{Labeled: c, Unlabeled: c, Table: fixtureTable(t), Hyper: h, Device: gotch.CPU}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			first, last := res.Epochs[0], res.Epochs[len(res.Epochs)-1]
			t.Logf("%s: loss %.3f -> %.3f, recon %.3f -> %.3f, kl %.3f -> %.3f, class %.3f -> %.3f", variant,
				first.Loss, last.Loss, first.Recon, last.Recon, first.KL, last.KL, first.Class, last.Class)
			if !(last.Loss < first.Loss) {
				t.Errorf("loss %v after %d epochs, %v after the first", last.Loss, len(res.Epochs), first.Loss)
			}
			if !(last.Class < first.Class) {
				t.Errorf("classification loss %v after %d epochs, %v after the first", last.Class, len(res.Epochs), first.Class)
			}
			if first.Unlabeled == 0 {
				t.Error("no unlabeled sentence seen")
			}
		})
	}
}

// TestSaveLoad: a loaded model predicts what the saved one did.
func TestSaveLoad(t *testing.T) {
	c := traintest.Corpus(traintest.Fixture)
	h := tinyHyperparams(Hier)
	h.Run.Epochs = 3
	m, _, err := Fit(context.Background(), Job{Labeled: c, Table: fixtureTable(t), Hyper: h, Device: gotch.CPU}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	dir := t.TempDir()
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	m2, err := Load(dir, gotch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	c.Sentences = append(c.Sentences, corpus.Sentence{}, corpus.Sentence{Tokens: []string{"Lisbon", "unseen-word"}})
	p1, err := m.Predict(c, 4)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := m2.Predict(c, 4)
	if err != nil {
		t.Fatal(err)
	}
	for i := range p1 {
		if !slices.Equal(p1[i].Tags, p2[i].Tags) || len(p1[i].Tags) != len(c.Sentences[i].Tokens) {
			t.Fatalf("sentence %d: %v before saving, %v after", i+1, p1[i].Tags, p2[i].Tags)
		}
		for j := range p1[i].Probs {
			for k := range p1[i].Probs[j] {
				if math.Abs(float64(p1[i].Probs[j][k]-p2[i].Probs[j][k])) > 1e-5 {
					t.Fatalf("sentence %d, token %d: probabilities %v before saving, %v after", i+1, j+1, p1[i].Probs[j], p2[i].Probs[j])
				}
			}
		}
	}
}

// Tags of any scheme become the model's classes; an entity of unknown
// type adds no classification loss; a tag outside the tag set is an error.
func TestEncodeTargets(t *testing.T) {
	m, _ := tinyModel(t, Flat)
	c := traintest.Corpus([]string{"Anna/I-PER Weber/I-PER met Ann/I-? in Rome/I-LOC ."})
	exs, err := m.encode(c, true)
	if err != nil {
		t.Fatal(err)
	}
	// IOB1 input read with conlleval's rules, in BIO: B-PER I-PER O ? O B-LOC O.
	if want := []int64{1, 2, 0, ignored, 0, 3, 0}; !slices.Equal(exs[0].targets, want) {
		t.Errorf("targets %v, want %v", exs[0].targets, want)
	}
	if b := newBatch(exs, []int{0}); b.labeled != 6 {
		t.Errorf("%d labeled tokens, want 6", b.labeled)
	}
	if _, err := m.encode(traintest.Corpus([]string{"Anna/B-ORG ."}), true); err == nil || !strings.Contains(err.Error(), "sentence 1: token 1") {
		t.Errorf("a tag outside the tag set: %v", err)
	}
}
