package tagger

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/kit"
)

func TestTemperature(t *testing.T) {
	// T = sqrt(C - c), c the epochs done: 4 epochs run at 2, sqrt 3, sqrt 2, 1.
	for epoch, want := range map[int]float64{1: 2, 2: math.Sqrt(3), 3: math.Sqrt(2), 4: 1} {
		if got := temperature(epoch, 4); math.Abs(got-want) > 1e-12 {
			t.Errorf("temperature(%d, 4) = %v, want %v", epoch, got, want)
		}
	}
	if got := temperature(1, 1); got != 1 {
		t.Errorf("a single epoch runs at %v, want 1", got)
	}
}

// TestNegativeWeights checks e = softmax(r / T), r = u * max(0, 1 + v)^mu,
// on three spans with logits [O, PER]:
//
//	[0, 0]: p = (1/2, 1/2), u = ln 2,  v = 0,  r = ln 2 = 0.693147
//	[2, 0]: p = (e²/(e²+1), 1/(e²+1)) = (0.880797, 0.119203),
//	        u = 0.365334,   v = 2,  r = 3^mu u (mu = 1: 1.096002)
//	[0, 3]: v = -3, 1 + v floored at 0, r = 0
//
// mu = 1, T = 1: e = (2, e^1.096002, 1) / 5.992 = (0.333768, 0.499347, 0.166884);
// T = 2: e ∝ (e^0.346574, e^0.548001, 1) = (0.341267, 0.417420, 0.241312);
// mu = 8: r = 6561 u = 2396.96 for the second span, which takes all.
func TestNegativeWeights(t *testing.T) {
	logits := [][]float32{{0, 0}, {2, 0}, {0, 3}}
	for _, tc := range []struct {
		mu, temp float64
		want     []float64
	}{
		{1, 1, []float64{0.333768, 0.499347, 0.166884}},
		{1, 2, []float64{0.341267, 0.417420, 0.241312}},
		{8, 2, []float64{0, 1, 0}},
	} {
		got := negativeWeights(logits, tc.mu, tc.temp)
		for i := range got {
			if math.Abs(got[i]-tc.want[i]) > 1e-6 {
				t.Errorf("mu %v, T %v: weights %v, want %v", tc.mu, tc.temp, got, tc.want)
				break
			}
		}
	}
}

// TestDrawWithout checks the draws: distinct, all of them when k >= n,
// never an index of weight 0 while others are left, and a first draw that
// follows the weights (frequencies over 40,000 seeded draws within 0.01).
func TestDrawWithout(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	if got := drawWithout(rng, 3, 5, nil); !slices.Equal(got, []int{0, 1, 2}) {
		t.Errorf("k > n: %v, want all three", got)
	}
	for range 100 {
		got := drawWithout(rng, 10, 4, nil)
		if len(got) != 4 || len(slices.Compact(slices.Sorted(slices.Values(got)))) != 4 {
			t.Fatalf("uniform draw %v, want 4 distinct indices", got)
		}
		got = drawWithout(rng, 4, 2, []float64{0, 0.5, 0, 0.5})
		if slices.Contains(got, 0) || slices.Contains(got, 2) {
			t.Fatalf("weighted draw %v took an index of weight 0", got)
		}
	}
	weights := []float64{0.333768, 0.499347, 0.166884}
	counts := make([]float64, 3)
	const n = 40000
	for range n {
		counts[drawWithout(rng, 3, 1, weights)[0]]++
	}
	for i := range counts {
		if math.Abs(counts[i]/n-weights[i]) > 0.01 {
			t.Errorf("first draws %v of %d, want frequencies %v", counts, n, weights)
			break
		}
	}
	// The second draw renormalizes over what is left: after index 1,
	// index 0 comes with probability 0.333768 / (0.333768 + 0.166884).
	second := 0.0
	for range n {
		if d := drawWithout(rng, 3, 2, weights); d[0] == 1 && d[1] == 0 {
			second++
		}
	}
	if want := 0.499347 * 0.333768 / 0.500652; math.Abs(second/n-want) > 0.01 {
		t.Errorf("draws (1, 0): frequency %v, want %v", second/n, want)
	}
}

func TestDecodeSpans(t *testing.T) {
	sp := func(s, e int, label string, score float32) scoredSpan {
		return scoredSpan{corpus.Span{Start: s, End: e, Label: label}, score}
	}
	got := decodeSpans([]scoredSpan{sp(0, 2, "PER", 0.6), sp(1, 3, "LOC", 0.9), sp(3, 4, "PER", 0.7), sp(0, 1, "ORG", 0.5)})
	want := []corpus.Span{{Start: 0, End: 1, Label: "ORG"}, {Start: 1, End: 3, Label: "LOC"}, {Start: 3, End: 4, Label: "PER"}}
	if !slices.Equal(got, want) {
		t.Errorf("decoded %v, want %v", got, want)
	}
	// Random candidates: the decoded spans never overlap, and every
	// candidate left out overlaps a kept span that scores at least as much.
	rng := rand.New(rand.NewPCG(3, 4))
	for range 500 {
		var cands []scoredSpan
		for range rng.IntN(30) {
			s := rng.IntN(12)
			cands = append(cands, sp(s, s+1+rng.IntN(4), "X", float32(rng.IntN(5))))
		}
		kept := decodeSpans(cands)
		for i := 1; i < len(kept); i++ {
			if kept[i].Start < kept[i-1].End {
				t.Fatalf("overlapping spans %v and %v decoded from %v", kept[i-1], kept[i], cands)
			}
		}
		for _, c := range cands {
			if slices.Contains(kept, c.Span) {
				continue
			}
			if !slices.ContainsFunc(cands, func(k scoredSpan) bool {
				return slices.Contains(kept, k.Span) && k.score >= c.score && c.Start < k.End && k.Start < c.End
			}) {
				t.Fatalf("candidate %v dropped without a better overlapping span kept (%v)", c, kept)
			}
		}
	}
}

func spanConfig() Config {
	cfg := tinyConfig(SpanHead, "bio")
	cfg.MaxSpan = 3
	return cfg
}

// TestMissampling trains one epoch that draws every candidate negative
// (neg_ratio 10) on two sentences whose gold lost an entity each:
//
//	John Smith lives in Paris .        6 tokens, 3+3+3+3+2+1 = 15 spans of
//	                                   at most 3 tokens; John Smith annotated,
//	                                   Paris [4,5) dropped: 14 negatives
//	The mayor of Rome met Anna Weber . 8 tokens, 6*3+2+1 = 21 spans; Rome
//	                                   annotated, Anna Weber [5,7) dropped: 20
//
// so 34 negatives, of which 2 are entities of the complete annotation.
func TestMissampling(t *testing.T) {
	complete := fixtureCorpus([]string{fixture[0], fixture[2]})
	masked := fixtureCorpus([]string{
		"John/B-PER Smith/I-PER lives in Paris .",
		"The mayor of Rome/B-LOC met Anna Weber .",
	})
	for _, sampling := range samplings {
		m := newTiny(t, masked, spanConfig(), 1)
		cfg := tinyTrainConfig(LossNegSample)
		cfg.Epochs = 2
		cfg.SetLossParam("neg_ratio", 10)
		cfg.SetLossParam("sampling", sampling)
		tr, err := NewTrainer(m, cfg, WithCompleteAnnotation(complete))
		if err != nil {
			t.Fatal(err)
		}
		res, err := tr.Run(context.Background(), masked, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, ep := range res.Epochs {
			if ep.Negatives != 34 || ep.Missampled != 2 || ep.Missampling == nil || math.Abs(*ep.Missampling-2.0/34) > 1e-12 {
				t.Errorf("%s, epoch %d: %d negatives, %d missampled (%v), want 34, 2", sampling, ep.Epoch, ep.Negatives, ep.Missampled, ep.Missampling)
			}
		}
	}
	// Without a complete annotation there is no rate to report.
	m := newTiny(t, masked, spanConfig(), 1)
	cfg := tinyTrainConfig(LossNegSample)
	cfg.Epochs = 1
	tr, _ := NewTrainer(m, cfg)
	res, err := tr.Run(context.Background(), masked, nil)
	if err != nil {
		t.Fatal(err)
	}
	// ceil(0.35 * 6) + ceil(0.35 * 8) = 3 + 3 draws.
	if ep := res.Epochs[0]; ep.Missampling != nil || ep.Negatives != 6 {
		t.Errorf("no complete annotation: %d negatives, missampling %v, want 6 and none", ep.Negatives, ep.Missampling)
	}
}

// TestSpanTrainingLowersLossAndRoundTrips trains the span head with both
// samplings: the loss falls, predictions are well-formed BIO of
// non-overlapping spans, and a saved tagger predicts the same.
func TestSpanTrainingLowersLossAndRoundTrips(t *testing.T) {
	c := fixtureCorpus(fixture)
	for _, sampling := range samplings {
		t.Run(sampling, func(t *testing.T) {
			m := newTiny(t, c, spanConfig(), 1)
			cfg := tinyTrainConfig(LossNegSample)
			cfg.SetLossParam("sampling", sampling)
			cfg.Epochs = 15 // drawn negatives make the loss noisier than the taggers'
			checkLossFalls(t, m, cfg, c)
			before, err := m.Predict(c, 3)
			if err != nil {
				t.Fatal(err)
			}
			checkValidPredictions(t, before)
			checkRoundTrip(t, m, c, before)
		})
	}
}

func TestNegSampleConfig(t *testing.T) {
	cfg := tinyTrainConfig(LossNegSample)
	cfg.SetLossParam("sampling", "greedy")
	m := newTiny(t, fixtureCorpus(fixture), spanConfig(), 1)
	if _, err := NewTrainer(m, cfg); err == nil {
		t.Error("sampling greedy: no error")
	}
	cfg = tinyTrainConfig(LossCE)
	if _, err := NewTrainer(m, cfg); err == nil {
		t.Error("loss ce on the span head: no error")
	}
	bad := spanConfig()
	bad.MaxSpan = 0
	if err := bad.validate(); err == nil {
		t.Error("span head with max_span 0: no error")
	}
}

// The span channel: a drawn negative (class 0) may be an entity of a type
// with a miss rate, at that rate; an annotated span of a type with a
// mistype rate may be another type's, never O; types without rates keep
// the one-hot target, and no rate at all is no channel.
func TestSpanChannel(t *testing.T) {
	if ch := newSpanChannel([]string{"PER", "LOC"}, typedRates{}); ch != nil {
		t.Errorf("no rates: channel %+v, want none", ch)
	}
	ch := newSpanChannel([]string{"PER", "LOC", "MISC"}, typedRates{
		miss:    map[string]float64{"MISC": 0.8, "LOC": 0},
		mistype: map[string]float64{"PER": 0.1},
	})
	ln := func(x float64) float32 { return float32(math.Log(x)) }
	for _, c := range []struct {
		target int64
		want   []float32
	}{
		{0, []float32{0, notAllowed, notAllowed, ln(0.8)}},    // O, or MISC at 0.8
		{1, []float32{notAllowed, 0, ln(0.1), ln(0.1)}},       // PER, or another type at 0.1
		{2, []float32{notAllowed, notAllowed, 0, notAllowed}}, // LOC: sure
		{3, []float32{notAllowed, notAllowed, notAllowed, 0}}, // MISC: sure
	} {
		if got := ch.evidence(c.target); !slices.Equal(got, c.want) {
			t.Errorf("class %d: evidence %v, want %v", c.target, got, c.want)
		}
	}
}

// A span of unknown type is a positive of any entity class: its evidence
// rules out O alone, its loss is -log(1 - p(O)), and its gradient moves
// p toward the entity classes' posterior, p_c / (1 - p(O)).
func TestSpanEvidenceOfUnknownType(t *testing.T) {
	targets := []int64{1, anyEntityClass}
	if got, want := spanEvidence(nil, targets, 3), []float32{notAllowed, 0, notAllowed, notAllowed, 0, 0}; !slices.Equal(got, want) {
		t.Errorf("evidence %v, want %v", got, want)
	}
	ch := newSpanChannel([]string{"PER", "LOC"}, typedRates{mistype: map[string]float64{"PER": 0.1}})
	ln := float32(math.Log(0.1))
	if got, want := spanEvidence(ch, targets, 3), []float32{notAllowed, 0, ln, notAllowed, 0, 0}; !slices.Equal(got, want) {
		t.Errorf("evidence with a channel %v, want %v", got, want)
	}

	lockThread(t)
	g := kit.NewGraph(gotch.CPU)
	defer g.Free()
	z := leaf(t, g, lossLogits, 2, 3)
	loss := noisyCrossEntropy(g, z, spanEvidence(nil, targets, 3), lossWeights)
	// (1·-log 0.62853172 + 0.5·-log(0.01714783 + 0.93623955)) / 1.5
	near(t, "loss", kit.Item(loss), 0.3254905146851697, 1e-6)
	posterior := [][]float64{{0, 1, 0}, {0, 0.01798620996209156, 0.9820137900379085}}
	checkGrad(t, gradOf(t, g, loss, z), wantGrad(func(int) float64 { return 1 }, func(i, c int) float64 { return posterior[i][c] }))
}

// Each run of unknown-type targets is one entity; ignored tokens and
// typed ones end a run.
func TestUnknownSpans(t *testing.T) {
	got := unknownSpans([]int32{anyEntity, anyEntity, 0, ignored, anyEntity, 1, anyEntity})
	want := []corpus.Span{{Start: 0, End: 2, Label: "?"}, {Start: 4, End: 5, Label: "?"}, {Start: 6, End: 7, Label: "?"}}
	if !slices.Equal(got, want) {
		t.Errorf("spans %v, want %v", got, want)
	}
	if got := unknownSpans([]int32{0, ignored, 1}); got != nil {
		t.Errorf("no unknown type: %v", got)
	}
}

// The span classifier trains on entities of unknown type as entities
// (unknown_as_entity) and its loss falls.
func TestSpanTrainingOnUnknownType(t *testing.T) {
	c := fixtureCorpus(append(slices.Clone(fixture), "Zorg/B-? Blip/I-? visited Paris/B-LOC .", "Quux/B-? met Anna/B-PER ."))
	m := newTiny(t, c, spanConfig(), 1)
	cfg := tinyTrainConfig(LossNegSample)
	cfg.Epochs, cfg.UnknownAsEntity = 15, true
	checkLossFalls(t, m, cfg, c)
}

// spanIndex finds each candidate at its place in candidates' order.
func TestSpanIndex(t *testing.T) {
	for _, c := range []struct{ n, maxSpan int }{{5, 3}, {1, 10}, {12, 10}, {4, 1}} {
		for k, s := range candidates(0, c.n, c.maxSpan) {
			if got := spanIndex(s.start, s.end, c.n, c.maxSpan); got != k {
				t.Fatalf("n %d, max %d: span [%d,%d) at %d, spanIndex says %d", c.n, c.maxSpan, s.start, s.end, k, got)
			}
		}
	}
	if got := len(candidates(0, 6, 3)); got != 15 {
		t.Errorf("6 tokens, spans of at most 3: %d candidates, want 3+3+3+3+2+1 = 15", got)
	}
}

// The factored first layer equals the MLP on [h_i; h_j; h_i - h_j; h_i * h_j]
// computed directly.
func TestSpanLogitsFactored(t *testing.T) {
	c := fixtureCorpus(fixture)
	m := newTiny(t, c, spanConfig(), 1)
	w := m.head.(*spanWeightsOf)
	exs, err := m.encodeCorpus(c, true)
	if err != nil {
		t.Fatal(err)
	}
	b := newBatch(exs, []int{0, 1, 2})
	var spans []spanRef
	for i := range b.ids {
		spans = append(spans, candidates(i, sentenceLen(b, i), w.maxSpan)...)
	}
	g := kit.NewGraph(m.device)
	defer g.Free()
	var got, want []float32
	err = kit.Guard(func() {
		kit.NoGrad(func() {
			h := m.forward(g, b, false, nil)
			got = kit.Float32s(w.logits(g, h, b, spans))
			hh := kit.Float32s(h)
			in := len(hh) / b.n
			var rows []float32
			for _, s := range spans {
				hs := hh[b.pos(s.sent, s.start)*in : (b.pos(s.sent, s.start)+1)*in]
				he := hh[b.pos(s.sent, s.end-1)*in : (b.pos(s.sent, s.end-1)+1)*in]
				rows = append(rows, hs...)
				rows = append(rows, he...)
				for k := range hs {
					rows = append(rows, hs[k]-he[k])
				}
				for k := range hs {
					rows = append(rows, hs[k]*he[k])
				}
			}
			x := g.Floats(rows, int64(len(spans)), int64(4*in))
			z := g.T(g.T(ts.Linear(x, w.w1, w.b1)).Relu(false))
			want = kit.Float32s(g.T(ts.Linear(z, w.w2, w.b2)))
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if math.Abs(float64(got[i]-want[i])) > 1e-5 {
			t.Fatalf("logit %d: factored %v, direct %v", i, got[i], want[i])
		}
	}
}

// checkValidPredictions fails on a prediction whose tags break BIO or
// whose probabilities of a token do not sum to 1.
func checkValidPredictions(t *testing.T, preds []Prediction) {
	t.Helper()
	for i, p := range preds {
		if err := corpus.BIO.Validate(p.Tags); err != nil {
			t.Errorf("sentence %d: tags %v: %v", i+1, p.Tags, err)
		}
		for tok, row := range p.Probs {
			var sum float32
			for _, x := range row {
				sum += x
			}
			if math.Abs(float64(sum)-1) > 1e-4 {
				t.Fatalf("sentence %d, token %d: probabilities sum to %v", i+1, tok+1, sum)
			}
		}
	}
}
