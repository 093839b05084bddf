package tagger

import (
	"math"
	"reflect"
	"testing"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/kit"
)

// The Tie-or-Break fixture: encoder states of size 1, BIO over one type X
// (tags O, B-X, I-X = 0, 1, 2), and two sentences: "B-X I-X O" with
// states 1, 2, -1, and "O ?" with states 0.5, -0.5. Gap weights a = 1,
// c = 1, b0 = -1.5; type weights W = [[0, 0], [1, 1]] (None, X), bias
// [0.5, 0].
type tieBreakFixture struct {
	labels *Labels
	exs    []example
	b      *Batch
	states [][]float32 // by sentence
}

func newTieBreakFixture(t *testing.T) *tieBreakFixture {
	return tieBreakCase(t, [][]int32{{1, 2, 0}, {0, anyEntity}}, [][]float32{{1, 2, -1}, {0.5, -0.5}})
}

// tieBreakCase is a batch of sentences with the fixture's tag set and
// weights, their targets and encoder states given.
func tieBreakCase(t *testing.T, targets [][]int32, states [][]float32) *tieBreakFixture {
	labels, err := NewLabels(corpus.BIO, []string{"X"})
	if err != nil {
		t.Fatal(err)
	}
	f := &tieBreakFixture{labels: labels, states: states}
	for _, ys := range targets {
		e := example{words: make([]int64, len(ys)), casing: make([]int64, len(ys)), chars: make([][]int64, len(ys)), targets: ys}
		for i := range ys {
			e.chars[i] = []int64{2}
		}
		f.exs = append(f.exs, e)
	}
	ids := make([]int, len(f.exs))
	for i := range ids {
		ids[i] = i
	}
	f.b = newBatch(f.exs, ids)
	return f
}

// packed lays the states out in the batch's packed order ([n, 1]).
func (f *tieBreakFixture) packed() []float32 {
	out := make([]float32, f.b.n)
	for i, id := range f.b.ids {
		for t, x := range f.states[id] {
			out[f.b.pos(i, t)] = x
		}
	}
	return out
}

func (f *tieBreakFixture) weights(g *kit.Graph) *tieBreakWeightsOf {
	w := &tieBreakWeightsOf{
		labels: f.labels,
		gapW:   g.Floats([]float32{1, 1}, 1, 2), gapB: g.Floats([]float32{-1.5}, 1),
		typeW: g.Floats([]float32{0, 0, 1, 1}, 2, 2), typeB: g.Floats([]float32{0.5, 0}, 2),
	}
	w.classes = tagClasses(f.labels)
	return w
}

// The loss of the fixture, worked by hand. The known gaps are those of the
// first sentence, z1 = 1 + 2 - 1.5 = 1.5 (tie) and z2 = 2 - 1 - 1.5 = -0.5
// (break); the second sentence's gap touches "?" and is left out, and so is
// its every span. The labeled spans are [0, 2) of class X, logits
// u = [0.5, h0 + h1] = [0.5, 3], and [2, 3) of class None, u = [0.5, 2 h2]
// = [0.5, -2]:
//
//	gap  = (softplus(-1.5) + softplus(-0.5)) / 2 = (0.20141328 + 0.47407698) / 2 = 0.33774513
//	type = (log(1 + e^-2.5) + log(1 + e^-2.5)) / 2 = 0.07888973
//	loss = 0.41663486
//
// The gradient with respect to the states: each gap adds (sigmoid(z) - y)/2
// times a (= 1) to its left and c (= 1) to its right state; each span adds
// (softmax(u) - onehot)/2 . W[:, 0] to its first and . W[:, 1] to its last
// state (both 1 for X, 0 for None):
//
//	s1 = sigmoid(1.5) - 1 = -0.18242552, s2 = sigmoid(-0.5) = 0.37754067
//	p1 = softmax([0.5, 3])[X] - 1 = -0.07585818, p2 = softmax([0.5, -2])[X] = 0.07585818
//	dh0 = s1/2 + p1/2, dh1 = s1/2 + s2/2 + p1/2, dh2 = s2/2 + 2 p2/2, the second sentence 0.
func TestTieBreakLossByHand(t *testing.T) {
	lockThread(t)
	f := newTieBreakFixture(t)
	g := kit.NewGraph(gotch.CPU)
	defer g.Free()
	h := leaf(t, g, f.packed(), int64(f.b.n), 1)
	w := f.weights(g)
	tt := w.targets(&LossBatch{G: g, Batch: f.b, exs: f.exs})
	if len(tt.gapTie) != 2 || !reflect.DeepEqual(tt.gapTie, []int64{1, 0}) || !reflect.DeepEqual(tt.spanClass, []int64{1, 0}) {
		t.Fatalf("targets %+v", tt)
	}
	loss := w.loss(g, h, tt, nil)
	near(t, "loss", kit.Item(loss), 0.41663486, 1e-6)
	grad := gradOf(t, g, loss, h)

	sig := func(z float64) float64 { return 1 / (1 + math.Exp(-z)) }
	s1, s2 := sig(1.5)-1, sig(-0.5)
	p1 := math.Exp(3)/(math.Exp(0.5)+math.Exp(3)) - 1
	p2 := math.Exp(-2) / (math.Exp(0.5) + math.Exp(-2))
	want := [][]float64{{s1/2 + p1/2, s1/2 + s2/2 + p1/2, s2/2 + p2}, {0, 0}}
	for i, id := range f.b.ids {
		for tk, wv := range want[id] {
			near(t, "gradient", float64(grad[f.b.pos(i, tk)]), wv, 1e-6)
		}
	}
}

// The loss with the labels' O as partial evidence (miss_rate m = 0.25), on
// "O O B-X" with states 1, -1, 2 and the fixture's weights, worked by hand.
// The gap between the two unmatched tokens, z1 = 1 - 1 - 1.5 = -1.5, is an
// open break: a missed entity would tie them, so its likelihood is
// p(break) + m p(tie). The gap before the match, z2 = -1 + 2 - 1.5 = -0.5,
// is a sure break. The unmatched tokens' spans are None or, at m, X:
// u = [0.5, 2] and [0.5, -2]; the match's span is X, u = [0.5, 4]:
//
//	gap  = (-log(1 - 0.75 sigmoid(-1.5)) + softplus(-0.5)) / 2 = 0.31060401
//	type = (-log(p0 + m pX | u1) - log(p0 + m pX | u2) - log pX(u3)) / 3 = 0.34604155
//	loss = 0.65664556
//
// The gradient of -log sum_c p_c e_c with respect to a logit is p - q, with
// q the posterior p_c e_c / sum; for the tie logit of the open gap
// g1 = p_tie - m p_tie / (p_break + m p_tie) = 0.12959027, of the sure one
// g2 = sigmoid(-0.5) = 0.37754067; for the X logits s = 0.28917865,
// 0.05574958 and pX(u3) - 1 = -0.02931223, each reaching its one token
// twice (start and end):
//
//	dh0 = g1/2 + 2 s1/3, dh1 = g1/2 + g2/2 + 2 s2/3, dh2 = g2/2 + 2 s3/3
//
// (a central difference in float64 gives the same to 1e-9).
func TestTieBreakMissRateByHand(t *testing.T) {
	lockThread(t)
	f := tieBreakCase(t, [][]int32{{0, 0, 1}}, [][]float32{{1, -1, 2}})
	g := kit.NewGraph(gotch.CPU)
	defer g.Free()
	h := leaf(t, g, f.packed(), int64(f.b.n), 1)
	w := f.weights(g)
	tt := w.targets(&LossBatch{G: g, Batch: f.b, exs: f.exs})
	if !reflect.DeepEqual(tt.gapOpen, []bool{true, false}) || !reflect.DeepEqual(tt.spanClass, []int64{0, 0, 1}) {
		t.Fatalf("targets %+v", tt)
	}
	ch := newTieBreakChannel(f.labels.Types, labelNoise{missRate: 0.25})
	loss := w.loss(g, h, tt, ch)
	near(t, "loss", kit.Item(loss), 0.65664556, 1e-6)
	grad := gradOf(t, g, loss, h)
	g1, g2 := 0.12959027, 0.37754067
	s := []float64{0.28917865, 0.05574958, -0.02931223}
	want := []float64{g1/2 + 2*s[0]/3, g1/2 + g2/2 + 2*s[1]/3, g2/2 + 2*s[2]/3}
	for tk, wv := range want {
		near(t, "gradient", float64(grad[f.b.pos(0, tk)]), wv, 1e-6)
	}
	// At miss_rate 0 the same batch is cross entropy: no channel.
	if ch := newTieBreakChannel(f.labels.Types, labelNoise{}); ch != nil {
		t.Errorf("miss_rate 0: channel %+v, want none", ch)
	}
}

// The channel's rows: a type's own miss rate for an unmatched span, the
// mistype rate between types, and the gap at miss_rate alone.
func TestTieBreakChannelRates(t *testing.T) {
	types := []string{"X", "Y"}
	ch := newTieBreakChannel(types, labelNoise{rates: typedRates{miss: map[string]float64{"X": 0.8}, mistype: map[string]float64{"Y": 0.1}}})
	if ch == nil || ch.spans == nil {
		t.Fatal("per-type rates: no channel")
	}
	lg := func(x float64) float32 { return float32(math.Log(x)) }
	for y, want := range [][]float32{{0, lg(0.8), notAllowed}, {notAllowed, 0, notAllowed}, {notAllowed, lg(0.1), 0}} {
		if got := ch.spans.evidence(int64(y)); !reflect.DeepEqual(got, want) {
			t.Errorf("observed class %d: evidence %v, want %v", y, got, want)
		}
	}
	if ch.openTie != notAllowed {
		t.Errorf("miss_rate 0: the break between unmatched tokens allows a tie at %v", ch.openTie)
	}
	ch = newTieBreakChannel(types, labelNoise{missRate: 0.5, rates: typedRates{miss: map[string]float64{"X": 0.8}}})
	if ch.openTie != lg(0.5) || !reflect.DeepEqual(ch.spans.evidence(0), []float32{0, lg(0.8), lg(0.5)}) {
		t.Errorf("miss_rate 0.5, X 0.8: gap %v, unmatched span %v", ch.openTie, ch.spans.evidence(0))
	}
}

// Decoding the fixture: p(tie) = sigmoid(1.5) ties the first two tokens,
// sigmoid(-0.5) and, in the second sentence, sigmoid(0.5 - 0.5 - 1.5)
// break; the spans' classes are X for [0, 2) (u = [0.5, 3]), None for
// [2, 3) (u = [0.5, -2]), X for the second sentence's [0, 1) (u = [0.5, 1])
// and None for its [1, 2) (u = [0.5, -1]).
func TestTieBreakDecoding(t *testing.T) {
	lockThread(t)
	f := newTieBreakFixture(t)
	g := kit.NewGraph(gotch.CPU)
	defer g.Free()
	h := g.Floats(f.packed(), int64(f.b.n), 1)
	probs, paths := f.weights(g).Probabilities(g, h, f.b, f.labels.NumTags())
	want := map[int][]int{0: {1, 2, 0}, 1: {1, 0}}
	for i, id := range f.b.ids {
		if !reflect.DeepEqual(paths[i], want[id]) {
			t.Errorf("sentence %d: path %v, want %v", id, paths[i], want[id])
		}
	}
	// The first token's row: the span's None probability on O, X's on B-X.
	pX := math.Exp(3) / (math.Exp(0.5) + math.Exp(3))
	row := probs[f.b.pos(0, 0)*3 : f.b.pos(0, 0)*3+3]
	near(t, "p(O)", float64(row[0]), 1-pX, 1e-6)
	near(t, "p(B-X)", float64(row[1]), pX, 1e-6)
	near(t, "p(I-X)", float64(row[2]), 0, 1e-6)
}

// The gap labels the tags give: a tie only inside one entity, unknown next
// to an unknown-type or ignored token.
func TestTieBreakGapLabels(t *testing.T) {
	labels, err := NewLabels(corpus.BIOES, []string{"X", "Y"})
	if err != nil {
		t.Fatal(err)
	}
	w := &tieBreakWeightsOf{labels: labels, classes: tagClasses(labels)}
	idx := func(tag string) int32 { i, _ := labels.Index(tag); return int32(i) }
	for _, tc := range []struct {
		a, b    int32
		tie, ok bool
	}{
		{idx("B-X"), idx("I-X"), true, true},
		{idx("I-X"), idx("E-X"), true, true},
		{idx("E-X"), idx("B-X"), false, true},
		{idx("S-X"), idx("S-X"), false, true},
		{idx("B-X"), idx("I-Y"), false, true},
		{0, idx("B-X"), false, true},
		{idx("E-Y"), 0, false, true},
		{0, 0, false, true},
		{idx("B-X"), anyEntity, false, false},
		{ignored, 0, false, false},
	} {
		if tie, ok := w.gapOf(tc.a, tc.b); tie != tc.tie || ok != tc.ok {
			t.Errorf("%s, %s: tie %v ok %v", labels.Tags[max(tc.a, 0)], labels.Tags[max(tc.b, 0)], tie, ok)
		}
	}
}

// A tiny Tie-or-Break tagger lowers its loss, predicts valid BIO paths with
// rows that are distributions, and reproduces its predictions after a
// save and load.
func TestTieBreakTrainingLowersLossAndRoundTrips(t *testing.T) {
	c := fixtureCorpus(fixture)
	m := newTiny(t, c, tinyConfig(TieBreakHead, "bio"), 1)
	checkLossFalls(t, m, tinyTrainConfig(LossTieBreak), c)
	before, err := m.Predict(c, 3)
	if err != nil {
		t.Fatal(err)
	}
	checkValidPredictions(t, before)
	checkRoundTrip(t, m, c, before)
	if _, err := NewTrainer(m, tinyTrainConfig(LossCE)); err == nil {
		t.Error("loss ce on the tie-or-break head: no error")
	}
}
