package augment

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/train/lm"
)

func TestShape(t *testing.T) {
	for token, want := range map[string]string{
		"Paris": "Xx", "paris": "x", "PARIS": "X", "U.S.": "X.X.", "McDonald": "XxXx",
		"1996": "d", "3-2": "d-d", "1996-08-22": "d-d-d", ",": ",", "--": "--", "": "",
	} {
		if got := Shape(token); got != want {
			t.Errorf("Shape(%q) = %q, want %q", token, got, want)
		}
	}
}

// TestSampleTopK: the draw is among the k most likely words, in proportion
// to their probabilities renormalized among the k, whatever constant the
// scores are off by.
func TestSampleTopK(t *testing.T) {
	sampleTopK := func(logp []float64, k int, u float64) int {
		top := topCandidates(logp, k)
		shifted := make([]lm.Candidate, len(top))
		for i, c := range top {
			shifted[i] = lm.Candidate{ID: c.ID, Score: c.Score + 40}
		}
		if a, b := draw(top, u), draw(shifted, u); a != b {
			t.Fatalf("u %v: the scores drew %d, the same plus 40 drew %d", u, a, b)
		}
		return draw(top, u)
	}
	p := []float64{0, 0, 0.5, 0.1, 0.3, 0.05, 0.05}
	logp := make([]float64, len(p))
	for i, x := range p {
		logp[i] = math.Log(x) // -Inf for the reserved ids
	}
	// Top 2: ids 2 (0.5) and 4 (0.3), renormalized 0.625 and 0.375.
	for _, c := range []struct {
		u    float64
		want int
	}{{0, 2}, {0.62, 2}, {0.63, 4}, {0.999, 4}} {
		if got := sampleTopK(logp, 2, c.u); got != c.want {
			t.Errorf("u %v: id %d, want %d", c.u, got, c.want)
		}
	}
	// Ties go to the lower id: top 4 is 2, 4, 3, 5.
	if got := sampleTopK(logp, 4, 0.99); got != 5 {
		t.Errorf("last of the top 4: id %d, want 5", got)
	}
}

// TestMaskedPositionsRate: a sentence of 10 tokens masks 1 or 2 of them,
// 1.5 on average (15%), at distinct positions.
func TestMaskedPositionsRate(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	total := 0
	const draws = 20000
	for range draws {
		pos := maskedPositions(10, 0.15, rng)
		if len(pos) < 1 || len(pos) > 2 || !slices.IsSorted(pos) || len(slices.Compact(slices.Clone(pos))) != len(pos) || pos[len(pos)-1] >= 10 {
			t.Fatalf("positions %v", pos)
		}
		total += len(pos)
	}
	if mean := float64(total) / draws; math.Abs(mean-1.5) > 0.02 {
		t.Errorf("%.3f tokens masked on average, want 1.5", mean)
	}
	if pos := maskedPositions(3, 0.15, rand.New(rand.NewPCG(1, 1))); len(pos) > 1 {
		t.Errorf("3 tokens: %v masked", pos)
	}
}

var sentences = []corpus.Sentence{
	{Tokens: strings.Fields("The cat sat on the mat in Paris ."), Tags: strings.Fields("O O O O O O O I-LOC O")},
	{Tokens: strings.Fields("A dog ate the bone in London on Monday ."), Tags: strings.Fields("O O O O O O I-LOC O O O")},
	{Tokens: strings.Fields("The dog saw a cat , the cat saw 2 dogs ."), Tags: strings.Fields("O O O O O O O O O O O O")},
	{Tokens: strings.Fields("Paris and London are cities in Europe ."), Tags: strings.Fields("I-LOC O I-LOC O O O I-LOC O"), DocStart: true},
}

func tinyLM(t *testing.T) *lm.Model {
	t.Helper()
	var text [][]string
	for _, s := range sentences {
		text = append(text, s.Tokens)
	}
	m, err := lm.New(lm.Config{Dim: 4, Hidden: 6, Layers: 1}, lm.NewVocab(text, 0, 1), 5, gotch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// TestSentencesKeepLabelsAndShapes: tags and document starts are copied,
// only tokens change, each into a word of the same shape, no more of them
// than were masked; a seed and epoch give the same augmentation, another
// epoch another one.
func TestSentencesKeepLabelsAndShapes(t *testing.T) {
	m := tinyLM(t)
	var in []corpus.Sentence
	for range 25 {
		in = append(in, sentences...)
	}
	cfg := DefaultConfig()
	cfg.BatchSize = 16
	out, st, err := Sentences(m, in, cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	changed, minMasked, maxMasked := 0, 0, 0
	for i, s := range out {
		o := in[i]
		if !slices.Equal(s.Tags, o.Tags) || s.DocStart != o.DocStart || len(s.Tokens) != len(o.Tokens) {
			t.Fatalf("sentence %d: %v became %v", i, o, s)
		}
		x := cfg.Rate * float64(len(o.Tokens))
		minMasked += int(math.Floor(x))
		maxMasked += int(math.Ceil(x))
		for j, w := range s.Tokens {
			if w != o.Tokens[j] {
				changed++
				if Shape(w) != Shape(o.Tokens[j]) {
					t.Errorf("sentence %d: %q replaced by %q, another shape", i, o.Tokens[j], w)
				}
			}
		}
	}
	if st.Masked < minMasked || st.Masked > maxMasked || st.Masked != st.Replaced+st.Same+st.Kept || changed != st.Replaced {
		t.Errorf("stats %+v: %d tokens changed, %d to %d should be masked", st, changed, minMasked, maxMasked)
	}
	if st.Replaced == 0 || st.Kept == 0 {
		t.Errorf("stats %+v: want both replacements and originals kept for their shape", st)
	}
	if in[0].Tokens[0] != "The" {
		t.Error("the input was modified")
	}
	again, _, err := Sentences(m, in, cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	next, _, err := Sentences(m, in, cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	same, sameNext := true, true
	for i := range out {
		same = same && slices.Equal(out[i].Tokens, again[i].Tokens)
		sameNext = sameNext && slices.Equal(out[i].Tokens, next[i].Tokens)
	}
	if !same {
		t.Error("the same seed and epoch gave another augmentation")
	}
	if sameNext {
		t.Error("epoch 1 repeated epoch 0's augmentation")
	}
}

// recording is a language model that notes how many sentences each call
// asks about.
type recording struct {
	*lm.Model
	most int
}

func (r *recording) MaskedTopK(sentences [][]string, queries []lm.Masked, k, batchSize int) ([][]lm.Candidate, error) {
	r.most = max(r.most, len(sentences))
	return r.Model.MaskedTopK(sentences, queries, k, batchSize)
}

// topCandidates returns the k most likely words of a whole distribution
// (log probabilities, -Inf for words that must not be drawn), best first,
// the lower id first on a tie: the ranking MaskedTopK does on a model's
// device, written out in Go to check the drawing against.
func topCandidates(logp []float64, k int) []lm.Candidate {
	ids := make([]int, 0, k+1)
	for id, x := range logp {
		if math.IsInf(x, -1) {
			continue
		}
		at, _ := slices.BinarySearchFunc(ids, id, func(a, b int) int {
			if logp[a] != logp[b] {
				if logp[a] > logp[b] {
					return -1
				}
				return 1
			}
			return a - b
		})
		if at < k {
			ids = slices.Insert(ids, at, id)
			if len(ids) > k {
				ids = ids[:k]
			}
		}
	}
	out := make([]lm.Candidate, len(ids))
	for i, id := range ids {
		out[i] = lm.Candidate{ID: id, Score: logp[id]}
	}
	return out
}

// TestSentencesStream: the model is asked for one batch of sentences at a
// time, and the augmentation is the one drawn from the whole corpus's
// distributions at once (the masks and uniforms drawn in corpus order,
// then one call): the words the model ranks on its device (MaskedTopK)
// are drawn as from its whole distributions.
func TestSentencesStream(t *testing.T) {
	m := tinyLM(t)
	var in []corpus.Sentence
	for range 10 {
		in = append(in, sentences...)
	}
	cfg := DefaultConfig()
	cfg.BatchSize, cfg.Rate = 6, 0.3
	rec := &recording{Model: m}
	got, st, err := Sentences(rec, in, cfg, 2)
	if err != nil {
		t.Fatal(err)
	}
	if rec.most == 0 || rec.most > cfg.BatchSize {
		t.Errorf("a call asked about %d sentences, batch size %d", rec.most, cfg.BatchSize)
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 2))
	var tokens [][]string
	var queries []lm.Masked
	var draws []float64
	for i, s := range in {
		tokens = append(tokens, s.Tokens)
		for _, p := range maskedPositions(len(s.Tokens), cfg.Rate, rng) {
			queries = append(queries, lm.Masked{Sentence: i, Position: p})
			draws = append(draws, rng.Float64())
		}
	}
	logp, err := m.MaskedLogProbs(tokens, queries, cfg.BatchSize)
	if err != nil {
		t.Fatal(err)
	}
	want := make([][]string, len(in))
	for i, s := range in {
		want[i] = slices.Clone(s.Tokens)
	}
	for qi, q := range queries {
		w := m.Vocab.Words[draw(topCandidates(logp[qi], cfg.TopK), draws[qi])]
		if Shape(w) == Shape(want[q.Sentence][q.Position]) {
			want[q.Sentence][q.Position] = w
		}
	}
	for i := range in {
		if !slices.Equal(got[i].Tokens, want[i]) {
			t.Fatalf("sentence %d: %v, drawn from the whole corpus %v", i, got[i].Tokens, want[i])
		}
	}
	if st.Masked != len(queries) || st.Replaced == 0 {
		t.Fatalf("stats %+v, %d queries", st, len(queries))
	}
}
