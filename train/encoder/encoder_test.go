package encoder

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/augment"
	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/embeddings"
	"github.com/nerflow/nerflow/kit"
	"github.com/nerflow/nerflow/train/internal/traintest"
	"github.com/nerflow/nerflow/train/lm"
)

// numbers is a text whose masked words follow from their neighbours:
// runs of consecutive number words, each sentence starting anywhere.
func numbers(n int, seed uint64) [][]string {
	words := strings.Fields("one two three four five six seven eight nine ten eleven twelve")
	rng := rand.New(rand.NewPCG(seed, 9))
	out := make([][]string, n)
	for i := range out {
		start, l := rng.IntN(len(words)), 4+rng.IntN(6)
		for j := range l {
			out[i] = append(out[i], words[(start+j)%len(words)])
		}
	}
	return out
}

func tinyConfig() Config {
	return Config{Dim: 8, Layers: 1, Heads: 2, FFN: 16, MaxLen: 16, WordDim: 6, CharDim: 3, CharFilters: 4, PreLN: true}
}

func newModel(t *testing.T, cfg Config, v *Vocab) *Model {
	t.Helper()
	m, err := New(cfg, v, nil, 7, gotch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// set overwrites a weight with values.
func set(t *testing.T, x *ts.Tensor, values []float32) {
	t.Helper()
	shape, err := x.Size()
	if err != nil {
		t.Fatal(err)
	}
	g := kit.NewGraph(gotch.CPU)
	defer g.Free()
	var src *ts.Tensor
	if err := kit.Guard(func() { src = g.Floats(values, shape...) }); err != nil {
		t.Fatal(err)
	}
	if err := kit.CopyInto(x, src); err != nil {
		t.Fatal(err)
	}
}

func host(t *testing.T, x *ts.Tensor) []float32 {
	t.Helper()
	var v []float32
	if err := kit.Guard(func() { v = kit.Float32s(x) }); err != nil {
		t.Fatal(err)
	}
	return v
}

// eye is the rows×cols matrix with ones on the diagonal, stacked reps times.
func eye(reps, n int) []float32 {
	out := make([]float32, reps*n*n)
	for r := range reps {
		for i := range n {
			out[(r*n+i)*n+i] = 1
		}
	}
	return out
}

// attend runs one layer's attention on x [n, t, Dim] with sentence lengths.
func attend(t *testing.T, m *Model, x []float32, lens []int, tlen int) []float32 {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var out []float32
	kit.NoGrad(func() {
		g := kit.NewGraph(gotch.CPU)
		defer g.Free()
		err := kit.Guard(func() {
			n := int64(len(lens))
			bias := make([]float32, int(n)*tlen)
			for i, l := range lens {
				for j := l; j < tlen; j++ {
					bias[i*tlen+j] = padBias
				}
			}
			xs := g.Floats(x, n, int64(tlen), int64(m.Config.Dim))
			out = kit.Float32s(m.attention(g, &m.layers[0], xs, g.Floats(bias, n, 1, 1, int64(tlen)), n, int64(tlen), false, nil))
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	return out
}

// TestAttentionHandComputed: one head of width 2 with identity projections
// over the tokens (1, 0) and (0, 1): scores x·x'/√2, so each token weighs
// itself by e^{1/√2} against 1 for the other. A third, padding position with
// a large vector is attended by nobody, and itself attends to the two
// tokens equally.
func TestAttentionHandComputed(t *testing.T) {
	cfg := Config{Dim: 2, Layers: 1, Heads: 1, FFN: 2, MaxLen: 4, WordDim: 2, CharDim: 2, CharFilters: 2}
	m := newModel(t, cfg, NewVocab(numbers(3, 1), 0, 1))
	l := m.layers[0]
	set(t, l.qkvW, eye(3, 2))
	set(t, l.qkvB, make([]float32, 6))
	set(t, l.outW, eye(1, 2))
	set(t, l.outB, make([]float32, 2))
	got := attend(t, m, []float32{1, 0, 0, 1, 5, 5}, []int{2}, 3)
	a := math.Exp(1/math.Sqrt2) / (math.Exp(1/math.Sqrt2) + 1) // 0.66976
	want := []float64{a, 1 - a, 1 - a, a, 0.5, 0.5}
	for i := range want {
		if math.Abs(float64(got[i])-want[i]) > 1e-6 {
			t.Fatalf("attention output %v, want %v", got, want)
		}
	}
}

// TestAttentionMatchesReference compares two heads with random weights on
// two sentences of different lengths against the attention written out in
// loops.
func TestAttentionMatchesReference(t *testing.T) {
	cfg := Config{Dim: 4, Layers: 1, Heads: 2, FFN: 2, MaxLen: 4, WordDim: 2, CharDim: 2, CharFilters: 2}
	m := newModel(t, cfg, NewVocab(numbers(3, 1), 0, 1))
	l := m.layers[0]
	rng := rand.New(rand.NewPCG(3, 4))
	rnd := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	d, h, tl := 4, 2, 3
	qkvW, qkvB, outW, outB := rnd(3*d*d), rnd(3*d), rnd(d*d), rnd(d)
	set(t, l.qkvW, qkvW)
	set(t, l.qkvB, qkvB)
	set(t, l.outW, outW)
	set(t, l.outB, outB)
	lens := []int{3, 2}
	x := rnd(len(lens) * tl * d)
	got := attend(t, m, x, lens, tl)
	lin := func(w, b []float32, in []float64, rows int) []float64 { // w [rows, len(in)]
		out := make([]float64, rows)
		for r := range rows {
			out[r] = float64(b[r])
			for c := range in {
				out[r] += float64(w[r*len(in)+c]) * in[c]
			}
		}
		return out
	}
	dh := d / h
	for s, n := range lens {
		qkv := make([][]float64, tl)
		for p := range tl {
			in := make([]float64, d)
			for c := range d {
				in[c] = float64(x[(s*tl+p)*d+c])
			}
			qkv[p] = lin(qkvW, qkvB, in, 3*d)
		}
		for p := range tl {
			ctx := make([]float64, d)
			for hd := range h {
				var scores []float64
				for k := range n {
					var dot float64
					for c := range dh {
						dot += qkv[p][hd*dh+c] * qkv[k][d+hd*dh+c]
					}
					scores = append(scores, dot/math.Sqrt(float64(dh)))
				}
				mx := slices.Max(scores)
				var z float64
				for i := range scores {
					scores[i] = math.Exp(scores[i] - mx)
					z += scores[i]
				}
				for k := range n {
					for c := range dh {
						ctx[hd*dh+c] += scores[k] / z * qkv[k][2*d+hd*dh+c]
					}
				}
			}
			want := lin(outW, outB, ctx, d)
			for c := range d {
				if g := float64(got[(s*tl+p)*d+c]); math.Abs(g-want[c]) > 1e-4 {
					t.Fatalf("sentence %d position %d: %v, want %v", s, p, got[(s*tl+p)*d:(s*tl+p+1)*d], want)
				}
			}
		}
	}
}

func TestMaskingProportions(t *testing.T) {
	text := numbers(3000, 2)
	v := NewVocab(text, 0, 1)
	rng := rand.New(rand.NewPCG(5, 6))
	var chosen, how [3]int
	var total int
	for _, s := range text {
		ms := v.mask(s, DefaultMasking(), rng)
		total += len(s)
		if !slices.IsSorted(ms.chosen) || len(ms.chosen) != len(ms.how) || len(ms.chosen) != len(ms.targets) {
			t.Fatalf("malformed %+v", ms)
		}
		isChosen := map[int]bool{}
		for c, p := range ms.chosen {
			isChosen[p] = true
			chosen[0]++
			how[ms.how[c]]++
			if ms.targets[c] != int64(v.ID(s[p])) {
				t.Fatalf("target %d of %q, want its id", ms.targets[c], s[p])
			}
			switch ms.how[c] {
			case maskedToken:
				if ms.ids[p] != Mask || !slices.Equal(ms.spellings[p], []int64{maskChar}) {
					t.Fatalf("masked token reads %d %v", ms.ids[p], ms.spellings[p])
				}
			case randomToken:
				if ms.ids[p] < reserved || ms.ids[p] >= int64(v.Len()) || !slices.Equal(ms.spellings[p], v.charIDs(v.Words[ms.ids[p]])) {
					t.Fatalf("random token reads %d %v", ms.ids[p], ms.spellings[p])
				}
			case keptToken:
				if ms.ids[p] != int64(v.ID(s[p])) {
					t.Fatalf("kept token changed")
				}
			}
		}
		for p, w := range s {
			if !isChosen[p] && (ms.ids[p] != int64(v.ID(w)) || !slices.Equal(ms.spellings[p], v.charIDs(w))) {
				t.Fatalf("token %d of %v changed without being chosen", p, s)
			}
		}
	}
	rate := float64(chosen[0]) / float64(total)
	if math.Abs(rate-0.15) > 0.006 {
		t.Errorf("%.4f of the tokens chosen, want 0.15", rate)
	}
	for kind, want := range map[int]float64{maskedToken: 0.8, randomToken: 0.1, keptToken: 0.1} {
		if got := float64(how[kind]) / float64(chosen[0]); math.Abs(got-want) > 0.025 {
			t.Errorf("kind %d: %.3f of the chosen tokens, want %.2f", kind, got, want)
		}
	}
	if ms := v.mask(text[0], DefaultMasking(), nil); len(ms.chosen) != 0 {
		t.Errorf("no generator, yet %d chosen", len(ms.chosen))
	}
}

// zeroAll sets every weight to 0.
func zeroAll(t *testing.T, m *Model) {
	t.Helper()
	for _, nt := range m.named() {
		shape, err := nt.Tensor.Size()
		if err != nil {
			t.Fatal(err)
		}
		n := int64(1)
		for _, d := range shape {
			n *= d
		}
		set(t, nt.Tensor, make([]float32, n))
	}
}

// lossOf runs mlmLoss on a batch without dropout.
func lossOf(t *testing.T, m *Model, b *batch) (float64, int) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var sum float64
	var k int
	kit.NoGrad(func() {
		g := kit.NewGraph(gotch.CPU)
		defer g.Free()
		if err := kit.Guard(func() {
			l, n := m.mlmLoss(g, b, false, nil)
			sum, k = float64(kit.Float32s(l)[0]), n
		}); err != nil {
			t.Fatal(err)
		}
	})
	return sum, k
}

// TestLossHandComputed: with every weight 0 the layer norms output their
// bias (0), so the head scores each word by its output bias alone and the
// loss of a predicted word y is log Σ exp(b) - b_y. A chosen word outside
// the vocabulary is not scored.
func TestLossHandComputed(t *testing.T) {
	v := NewVocab([][]string{strings.Fields("a b c")}, 0, 1) // ids 3, 4, 5
	m := newModel(t, tinyConfig(), v)
	zeroAll(t, m)
	bias := []float32{0.5, -1, 2, 0.25, 1.5, -0.75}
	set(t, m.outB, bias)
	s := v.mask(strings.Fields("a b zzz c"), Masking{}, nil)
	s.chosen, s.targets, s.how = []int{0, 2, 3}, []int64{s.ids[0], s.ids[2], s.ids[3]}, []int{maskedToken, maskedToken, keptToken}
	s.ids[0], s.ids[2] = Mask, Mask
	b := newBatch([]maskedSentence{s, v.mask(strings.Fields("b"), Masking{}, nil)})
	if !slices.Equal(b.predict, []int64{0, 3}) {
		t.Fatalf("predicted positions %v, want 0 and 3 (zzz is unknown)", b.predict)
	}
	var lse float64
	for _, x := range bias {
		lse += math.Exp(float64(x))
	}
	lse = math.Log(lse)
	want := (lse - 0.25) + (lse + 0.75) // a (id 3), c (id 5)
	got, k := lossOf(t, m, b)
	if k != 2 || math.Abs(got-want) > 1e-5 {
		t.Fatalf("loss %v over %d words, want %v over 2", got, k, want)
	}
}

// TestLossMatchesLogits: with random weights, the loss is the negative log
// softmax of the head's logits at the targets, summed (the logits read back
// and the softmax taken in Go).
func TestLossMatchesLogits(t *testing.T) {
	text := numbers(20, 3)
	v := NewVocab(text, 0, 1)
	m := newModel(t, tinyConfig(), v)
	rng := rand.New(rand.NewPCG(1, 1))
	var sents []maskedSentence
	for _, s := range text[:4] {
		sents = append(sents, v.mask(s, Masking{Rate: 0.5, MaskProb: 0.8, RandomProb: 0.1}, rng))
	}
	b := newBatch(sents)
	got, k := lossOf(t, m, b)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var logits []float32
	kit.NoGrad(func() {
		g := kit.NewGraph(gotch.CPU)
		defer g.Free()
		if err := kit.Guard(func() {
			x := m.encode(g, b, false, nil)
			x = g.T(x.View([]int64{b.n * b.t, int64(m.Config.Dim)}, false))
			x = g.T(x.IndexSelect(0, g.Ints(b.predict, int64(len(b.predict))), false))
			logits = kit.Float32s(m.logits(g, x, false, nil))
		}); err != nil {
			t.Fatal(err)
		}
	})
	V := v.Len()
	var want float64
	for i, y := range b.targets {
		row := logits[i*V : (i+1)*V]
		var z float64
		for _, x := range row {
			z += math.Exp(float64(x))
		}
		want += math.Log(z) - float64(row[y])
	}
	if k != len(b.targets) || k == 0 || math.Abs(got-want) > 1e-4*max(1, math.Abs(want)) {
		t.Fatalf("loss %v over %d, want %v over %d", got, k, want, len(b.targets))
	}
}

// TestGradientCheck compares the gradient of the summed loss of a tiny
// model (no dropout) with central finite differences, for entries of every
// kind of weight.
func TestGradientCheck(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	text := numbers(10, 4)
	v := NewVocab(text, 0, 1)
	cfg := tinyConfig()
	for _, preLN := range []bool{true, false} {
		cfg.PreLN = preLN
		m := newModel(t, cfg, v)
		// Larger weights than the initial ones, so that every path carries
		// a gradient well above float32's rounding.
		rng := rand.New(rand.NewPCG(8, 8))
		for _, nt := range m.named() {
			vals := host(t, nt.Tensor)
			for i := range vals {
				vals[i] += float32(rng.NormFloat64() * 0.3)
			}
			if nt.Name == "char_emb" {
				clear(vals[:cfg.CharDim]) // padding's row stays 0, as the character CNN needs
			}
			set(t, nt.Tensor, vals)
		}
		mrng := rand.New(rand.NewPCG(2, 2))
		var sents []maskedSentence
		for _, s := range text[:3] {
			sents = append(sents, v.mask(s, Masking{Rate: 0.4, MaskProb: 0.5, RandomProb: 0.25}, mrng))
		}
		b := newBatch(sents)
		// Analytic gradients.
		g := kit.NewGraph(gotch.CPU)
		grads := map[string][]float32{}
		if err := kit.Guard(func() {
			l, _ := m.mlmLoss(g, b, false, nil)
			g.Check(l.Backward())
			for _, nt := range m.named() {
				gr := g.T(nt.Tensor.Grad(false))
				grads[nt.Name] = kit.Float32s(gr)
			}
		}); err != nil {
			t.Fatal(err)
		}
		g.Free()
		checked := 0
		for _, nt := range m.named() {
			vals := host(t, nt.Tensor)
			first := 0
			if nt.Name == "char_emb" {
				first = padChar*cfg.CharDim + cfg.CharDim // padding's row takes no gradient
			}
			for _, i := range []int{first, len(vals) / 2, len(vals) - 1} {
				const eps = 1e-2
				orig := vals[i]
				vals[i] = orig + eps
				set(t, nt.Tensor, vals)
				up, _ := lossOf(t, m, b)
				vals[i] = orig - eps
				set(t, nt.Tensor, vals)
				down, _ := lossOf(t, m, b)
				vals[i] = orig
				set(t, nt.Tensor, vals)
				fd := (up - down) / (2 * eps)
				an := float64(grads[nt.Name][i])
				if math.Abs(fd-an) > 2e-3+0.03*math.Abs(fd) {
					t.Errorf("pre_ln %v, %s[%d]: gradient %v, finite differences %v", preLN, nt.Name, i, an, fd)
				}
				if an != 0 {
					checked++
				}
			}
		}
		if checked < 3*len(m.named())/2 {
			t.Errorf("pre_ln %v: only %d nonzero gradient entries checked", preLN, checked)
		}
	}
}

// topics is a text of 4 topics of 3 words each: every sentence draws its
// words from one topic, so a masked word is one of the 3 words of the
// topic the rest of its sentence shows (perplexity 3 at best, 12 without
// context).
func topics(n int, seed uint64) [][]string {
	words := strings.Fields("red green blue cat dog cow one two three paris rome oslo")
	rng := rand.New(rand.NewPCG(seed, 10))
	out := make([][]string, n)
	for i := range out {
		topic := rng.IntN(4)
		for range 4 + rng.IntN(5) {
			out[i] = append(out[i], words[3*topic+rng.IntN(3)])
		}
	}
	return out
}

// TestTrainingLowersLoss pretrains on the topics text: the held-out
// perplexity falls from about 12 towards 3, which only the context can
// give.
func TestTrainingLowersLoss(t *testing.T) {
	text, heldout := topics(160, 5), topics(60, 6)
	v := NewVocab(text, 0, 1)
	cfg := Config{Dim: 16, Layers: 1, Heads: 2, FFN: 32, MaxLen: 16, WordDim: 8, CharDim: 4, CharFilters: 8, PreLN: true}
	m := newModel(t, cfg, v)
	before, err := m.Perplexity(heldout, DefaultMasking(), 64)
	if err != nil {
		t.Fatal(err)
	}
	run := DefaultTrainConfig()
	// A transformer this small at BERT's initial spread plateaus for about
	// a hundred steps before attention starts to carry the context.
	run.Epochs, run.BatchSize, run.LearningRate = 12, 8, 3e-3
	hist, err := Train(context.Background(), m, text, heldout, run, Options{})
	if err != nil {
		t.Fatal(err)
	}
	after := hist[len(hist)-1].Heldout
	t.Logf("held-out perplexity %.2f -> %.2f (%d words), loss %.3f -> %.3f", before.Perplexity, after.Perplexity, after.Predicted, hist[0].TrainLoss, hist[len(hist)-1].TrainLoss)
	if before.Perplexity < 9 || after.Perplexity > 6.5 || hist[len(hist)-1].TrainLoss >= hist[0].TrainLoss {
		t.Fatalf("held-out perplexity %.2f -> %.2f, want from about 12 to below 6.5", before.Perplexity, after.Perplexity)
	}
	checkMaskedWords(t, m, heldout)
}

// checkMaskedWords asks a model pretrained on the topics text for masked
// words: the distributions are normalized over the real words, most of
// their mass lies on the words of the sentence's topic, and RoSTER's
// augmentation drawing from them replaces words mostly within the topic.
func checkMaskedWords(t *testing.T, m *Model, text [][]string) {
	t.Helper()
	topicOf := map[string]int{}
	for i, w := range strings.Fields("red green blue cat dog cow one two three paris rome oslo") {
		topicOf[w] = i / 3
	}
	var queries []lm.Masked
	for i, s := range text {
		queries = append(queries, lm.Masked{Sentence: i, Position: i % len(s)}, lm.Masked{Sentence: i, Position: (i + 1) % len(s)})
	}
	logp, err := m.MaskedLogProbs(text, queries, 16)
	if err != nil {
		t.Fatal(err)
	}
	var inTopic float64
	for qi, q := range queries {
		var total float64
		for id, lp := range logp[qi] {
			p := math.Exp(lp)
			if id < reserved && p != 0 {
				t.Fatalf("reserved id %d has probability %v", id, p)
			}
			total += p
			if id >= reserved && topicOf[m.Vocab.Words[id]] == topicOf[text[q.Sentence][q.Position]] {
				inTopic += p
			}
		}
		if math.Abs(total-1) > 1e-6 {
			t.Fatalf("query %d: probabilities sum to %v", qi, total)
		}
	}
	inTopic /= float64(len(queries))
	top, err := m.MaskedTopK(text, queries, 3, 16)
	if err != nil {
		t.Fatal(err)
	}
	for qi, cands := range top {
		var ids []int
		var scores []float64
		for _, c := range cands {
			ids, scores = append(ids, c.ID), append(scores, c.Score)
		}
		traintest.CheckTopK(t, logp[qi], ids, scores, 3)
	}
	var sents []corpus.Sentence
	for _, s := range text {
		sents = append(sents, corpus.Sentence{Tokens: s})
	}
	aug, st, err := augment.Sentences(m, sents, augment.Config{Rate: 0.3, TopK: 3, Seed: 1, BatchSize: 16}, 0)
	if err != nil {
		t.Fatal(err)
	}
	same := 0
	for i, s := range aug {
		for j, w := range s.Tokens {
			if w != text[i][j] && topicOf[w] == topicOf[text[i][j]] {
				same++
			}
		}
	}
	t.Logf("mass on the topic's words %.2f; augmentation: %d masked, %d replaced, %d of them within the topic", inTopic, st.Masked, st.Replaced, same)
	if inTopic < 0.5 || st.Replaced == 0 || float64(same) < 0.8*float64(st.Replaced) {
		t.Fatalf("mass on the topic %.2f (want > 0.5, 0.25 without context); %d of %d replacements within the topic", inTopic, same, st.Replaced)
	}
}

func TestSaveLoadRoundTrip(t *testing.T) {
	text := numbers(30, 7)
	m := newModel(t, tinyConfig(), NewVocab(text, 0, 1))
	if _, err := Train(context.Background(), m, text, nil, TrainConfig{Epochs: 1, BatchSize: 8, LearningRate: 1e-2, Masking: DefaultMasking()}, Options{}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "enc")
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	back, err := Load(dir, gotch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	if back.Config != m.Config || !slices.Equal(back.Vocab.Words, m.Vocab.Words) || !slices.Equal(back.Vocab.Chars, m.Vocab.Chars) {
		t.Fatal("config or vocabulary changed")
	}
	sents := append(text[:3], []string{"twelve", "unseen-word", "one"})
	a, err := m.TokenStates(sents)
	if err != nil {
		t.Fatal(err)
	}
	b, err := back.TokenStates(sents)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatal("states differ after loading")
	}
	pa, _ := m.Perplexity(text, DefaultMasking(), 8)
	pb, _ := back.Perplexity(text, DefaultMasking(), 8)
	if pa != pb {
		t.Fatalf("perplexity %v, after loading %v", pa, pb)
	}
}

// TestTokenStatesWindows: a sentence longer than MaxLen is read in
// windows, each as if it were a sentence of its own; an unseen word gets a
// state of its own from its spelling.
func TestTokenStatesWindows(t *testing.T) {
	text := numbers(10, 8)
	m := newModel(t, tinyConfig(), NewVocab(text, 0, 1))
	long := slices.Concat(text[0], text[1], text[2], text[3]) // > 16 tokens
	if len(long) <= m.Config.MaxLen {
		t.Fatalf("fixture too short: %d", len(long))
	}
	all, err := m.TokenStates([][]string{long, {"onee", "twoo"}})
	if err != nil {
		t.Fatal(err)
	}
	first, err := m.TokenStates([][]string{long[:16], long[16:]})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(all[0]) != fmt.Sprint(append(first[0], first[1]...)) {
		t.Error("a long sentence's states are not those of its windows")
	}
	if slices.Equal(all[1][0], all[1][1]) {
		t.Error("two unseen words share a state")
	}
}

// TestWordVectorsFromTable: a word the table has (under its lower-case key)
// starts from the table's vector.
func TestWordVectorsFromTable(t *testing.T) {
	table, err := embeddings.NewTable(6, []string{"one", "two"}, []float32{1, 2, 3, 4, 5, 6, -1, -2, -3, -4, -5, -6})
	if err != nil {
		t.Fatal(err)
	}
	v := NewVocab([][]string{{"One", "two", "three"}}, 0, 1)
	m, err := New(tinyConfig(), v, table, 1, gotch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	emb := host(t, m.wordEmb)
	row := func(w string) []float32 { i := v.ID(w); return emb[i*6 : (i+1)*6] }
	if !slices.Equal(row("One"), []float32{1, 2, 3, 4, 5, 6}) || !slices.Equal(row("two"), []float32{-1, -2, -3, -4, -5, -6}) {
		t.Fatalf("rows %v %v", row("One"), row("two"))
	}
	cfg := tinyConfig()
	cfg.WordDim = 5
	if _, err := New(cfg, v, table, 1, gotch.CPU); err == nil {
		t.Fatal("a table of another width was accepted")
	}
}
