package tagger

import (
	"math"
	"strings"
	"testing"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/kit"
)

// The partial-label CRF's loss is -log sum_y p(y) prod_t c(obs_t | y_t),
// checked by enumerating every path of the fixture: an unmatched (O) token
// weighs each entity tag by its type's miss rate, a known tag rules the
// others out unless its type has a mistype rate (then the other entity
// tags weigh that rate), an unknown-type token rules O out and an ignored
// token allows every tag. Its gradient with respect to the emissions is
// p(y_t = j) - q(y_t = j), the model's marginals minus those of the
// evidence-weighted posterior q.
func TestPartialLossMatchesEnumeration(t *testing.T) {
	lockThread(t)
	// The fixture's three tags are those of the IO scheme over types A and
	// B: O, I-A, I-B.
	labels, err := NewLabels(corpus.IO, []string{"A", "B"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		miss     float64
		typeMiss map[string]float64 // by type
		mistype  map[string]float64
	}{
		{miss: 0}, {miss: 0.3}, {miss: 1},
		{miss: 0.3, typeMiss: map[string]float64{"A": 0.8}},
		{miss: 0.5, typeMiss: map[string]float64{"B": 0}, mistype: map[string]float64{"B": 0.25}},
		{miss: 0, mistype: map[string]float64{"A": 0.4, "B": 1}},
	} {
		missOf := func(j int) float64 {
			if r, ok := c.typeMiss[labels.Types[j-1]]; ok {
				return r
			}
			return c.miss
		}
		f := newCRFFixture(13)
		f.exs[0].targets = []int32{0, 1}
		f.exs[1].targets = []int32{2, anyEntity, ignored, 0}
		f.exs[2].targets = []int32{0}
		gold := make([]int64, f.b.n)
		for i, id := range f.b.ids {
			for tt, y := range f.exs[id].targets {
				gold[f.b.pos(i, tt)] = int64(y)
			}
		}
		// c is the labeler's likelihood of example id's label at token tt
		// given tag j.
		channel := func(id, tt, j int) float64 {
			switch y := f.exs[id].targets[tt]; {
			case y == ignored:
				return 1
			case y == anyEntity:
				return map[bool]float64{true: 0, false: 1}[j == 0]
			case y == 0 && j != 0:
				return missOf(j)
			case int(y) == j:
				return 1
			case y > 0 && j != 0:
				return c.mistype[labels.Types[y-1]] // 0 when the type has none
			}
			return 0
		}
		g := kit.NewGraph(gotch.CPU)
		k := int64(f.k)
		em := leaf(t, g, f.packed(), int64(f.b.n), k)
		nll := crfMarginalNLL(g, em, g.Floats(f.trans, k, k), g.Floats(f.start, k), g.Floats(f.end, k), f.b,
			newLabelChannel(labels.Tags, labelNoise{missRate: c.miss, rates: typedRates{miss: c.typeMiss, mistype: c.mistype}}).evidence(gold), f.k)
		grad := gradOf(t, g, nll, em)

		want := 0.0
		for i, id := range f.b.ids {
			rows := f.em[id]
			z := f.bruteLogZ(rows, allTags)
			// The evidence-weighted mass of the paths, in total and by the
			// tag of each token.
			total := 0.0
			byTag := make([][]float64, len(rows))
			for tt := range rows {
				byTag[tt] = make([]float64, f.k)
			}
			for _, p := range paths(len(rows), f.k) {
				w := math.Exp(f.score(rows, p) - z)
				for tt, j := range p {
					w *= channel(id, tt, j)
				}
				total += w
				for tt, j := range p {
					byTag[tt][j] += w
				}
			}
			want -= math.Log(total)
			for tt := range rows {
				for j := range f.k {
					marg := math.Exp(f.bruteLogZ(rows, func(s, c int) bool { return s != tt || c == j }) - z)
					near(t, "gradient", float64(grad[f.b.pos(i, tt)*f.k+j]), marg-byTag[tt][j]/total, 1e-5)
				}
			}
		}
		near(t, "partial nll", kit.Item(nll), want, 1e-5)
		g.Free()
	}
}

func TestPartialLossChecksMissRate(t *testing.T) {
	cfg := func(miss float64) TrainConfig {
		c := TrainConfig{Loss: LossPartial, Epochs: 1, BatchSize: 1, LearningRate: 1}
		c.SetLossParam("miss_rate", miss)
		return c
	}
	for _, miss := range []float64{-0.1, 1.5} {
		if err := cfg(miss).validate(CRFHead); err == nil {
			t.Errorf("miss_rate %v: want an error", miss)
		}
	}
	if err := cfg(0.4).validate(CRFHead); err != nil {
		t.Errorf("miss_rate 0.4: %v", err)
	}
	if err := cfg(0.4).validate(TokenHead); err == nil {
		t.Error("partial with the token head: want an error")
	}
}

// Per-type rates are TYPE=RATE items, each type once and each rate in
// [0, 1]; binding them to a tag set refuses a type it lacks, naming the
// types it has.
func TestPartialLossChecksTypeRates(t *testing.T) {
	cfg := func(name string, items ...string) TrainConfig {
		c := TrainConfig{Loss: LossPartial, Epochs: 1, BatchSize: 1, LearningRate: 1}
		c.SetLossParam(name, items)
		return c
	}
	for _, name := range []string{"type_miss_rates", "mistype_rates"} {
		for _, bad := range [][]string{{"MISC"}, {"=0.5"}, {"MISC=x"}, {"MISC=1.5"}, {"MISC=-0.1"}, {"MISC=0.8", "MISC=0.7"}} {
			if err := cfg(name, bad...).validate(CRFHead); err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("%s %q: want an error naming the parameter, got %v", name, bad, err)
			}
		}
		c := cfg(name, "MISC=0.8", " PER = 0.3 ")
		if err := c.validate(CRFHead); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		l, err := configureLoss(c, CRFHead)
		if err != nil {
			t.Fatal(err)
		}
		labels, err := NewLabels(corpus.BIO, []string{"LOC", "PER"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = l.(TagSetLoss).ForLabels(labels)
		if err == nil || !strings.Contains(err.Error(), "MISC") || !strings.Contains(err.Error(), "LOC, PER") {
			t.Errorf("%s with type MISC on a LOC/PER tagger: %v", name, err)
		}
	}
	// Bound, the rates land on the tags of their types.
	c := cfg("type_miss_rates", "MISC=0.8")
	c.SetLossParam("mistype_rates", []string{"PER=0.25"})
	l, err := configureLoss(c, CRFHead)
	if err != nil {
		t.Fatal(err)
	}
	labels, _ := NewLabels(corpus.BIO, []string{"MISC", "PER"})
	bound, err := l.(TagSetLoss).ForLabels(labels)
	if err != nil {
		t.Fatal(err)
	}
	ch := bound.(partialLoss).channel
	for j, tag := range labels.Tags[1:] {
		wantMiss, wantMistype := 0.5, float32(notAllowed)
		if strings.HasSuffix(tag, "MISC") {
			wantMiss = 0.8
		} else {
			wantMistype = float32(math.Log(0.25))
		}
		near(t, tag+" miss", float64(ch.miss[j+1]), math.Log(wantMiss), 1e-6)
		if ch.mistype[j+1] != wantMistype {
			t.Errorf("%s mistype %v, want %v", tag, ch.mistype[j+1], wantMistype)
		}
	}
}

// Both losses that take the labels' noise by type bind it to the
// tagger's types when a trainer is made: a type the tagger lacks stops it
// before the first step, naming the types it has, and rates of its own
// types train, lowering the loss on the fixture.
func TestTypeRatesBindToTheTagger(t *testing.T) {
	c := fixtureCorpus(fixture)
	for _, k := range []struct {
		loss   string
		model  Config
		epochs int // the span head's drawn negatives make its loss noisier
	}{
		{LossPartial, tinyConfig(CRFHead, "bio"), 0},
		{LossNegSample, spanConfig(), 15},
	} {
		t.Run(k.loss, func(t *testing.T) {
			cfg := tinyTrainConfig(k.loss)
			if k.epochs > 0 {
				cfg.Epochs = k.epochs
			}
			cfg.SetLossParam("type_miss_rates", []string{"MISC=0.8"})
			if _, err := NewTrainer(newTiny(t, c, k.model, 1), cfg); err == nil || !strings.Contains(err.Error(), "MISC") || !strings.Contains(err.Error(), "PER, LOC") {
				t.Errorf("type_miss_rates with a type the PER/LOC tagger lacks: %v", err)
			}
			cfg.SetLossParam("type_miss_rates", []string{"LOC=0.5"})
			cfg.SetLossParam("mistype_rates", []string{"PER=0.1"})
			checkLossFalls(t, newTiny(t, c, k.model, 1), cfg, c)
		})
	}
}
