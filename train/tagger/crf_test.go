package tagger

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/kit"
	"github.com/nerflow/nerflow/train/internal/traintest"
)

// crfFixture is a batch of three sentences of lengths 2, 4 and 1 with K = 3
// tags and random emissions and transitions.
type crfFixture struct {
	k                 int
	exs               []example
	b                 *Batch
	em                [][][]float32 // per example: rows of k scores
	trans, start, end []float32
}

func newCRFFixture(seed uint64) *crfFixture {
	rng := rand.New(rand.NewPCG(seed, 1))
	f := &crfFixture{k: 3}
	rnd := func(n int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = float32(rng.NormFloat64())
		}
		return out
	}
	for _, n := range []int{2, 4, 1} {
		e := example{words: make([]int64, n), casing: make([]int64, n), chars: make([][]int64, n)}
		for t := range n {
			e.chars[t] = []int64{2}
		}
		f.exs = append(f.exs, e)
		var rows [][]float32
		for range n {
			rows = append(rows, rnd(f.k))
		}
		f.em = append(f.em, rows)
	}
	f.trans, f.start, f.end = rnd(f.k*f.k), rnd(f.k), rnd(f.k)
	f.b = newBatch(f.exs, []int{0, 1, 2})
	return f
}

// packed lays the emissions out in the batch's packed order.
func (f *crfFixture) packed() []float32 {
	out := make([]float32, f.b.n*f.k)
	for i, id := range f.b.ids {
		for t, row := range f.em[id] {
			copy(out[f.b.pos(i, t)*f.k:], row)
		}
	}
	return out
}

// paths enumerates every tag path of length n over k tags.
var paths = traintest.Paths

func (f *crfFixture) score(em [][]float32, path []int) float64 {
	s := float64(f.start[path[0]] + f.end[path[len(path)-1]])
	for t, j := range path {
		s += float64(em[t][j])
		if t > 0 {
			s += float64(f.trans[path[t-1]*f.k+j])
		}
	}
	return s
}

// bruteLogZ is log sum over the paths allowed by ok of exp(score).
func (f *crfFixture) bruteLogZ(em [][]float32, ok func(t, j int) bool) float64 {
	var scores []float64
	for _, p := range paths(len(em), f.k) {
		allowed := true
		for t, j := range p {
			allowed = allowed && ok(t, j)
		}
		if allowed {
			scores = append(scores, f.score(em, p))
		}
	}
	return logSumExp(scores)
}

func allTags(int, int) bool { return true }

func TestCRFLogPartitionAndGradientMatchBruteForce(t *testing.T) {
	lockThread(t)
	f := newCRFFixture(7)
	g := kit.NewGraph(gotch.CPU)
	defer g.Free()
	k := int64(f.k)
	em := leaf(t, g, f.packed(), int64(f.b.n), k)
	trans := g.Floats(f.trans, k, k)
	logZ := crfLogPartition(g, em, trans, g.Floats(f.start, k), g.Floats(f.end, k), f.b)

	want := 0.0
	for _, rows := range f.em {
		want += f.bruteLogZ(rows, allTags)
	}
	near(t, "sum of log Z", kit.Item(logZ), want, 1e-5)

	// d log Z / d e_t[j] is the marginal p(y_t = j).
	grad := gradOf(t, g, logZ, em)
	for i, id := range f.b.ids {
		rows := f.em[id]
		z := f.bruteLogZ(rows, allTags)
		for tt := range rows {
			for j := range f.k {
				marg := math.Exp(f.bruteLogZ(rows, func(s, c int) bool { return s != tt || c == j }) - z)
				near(t, "gradient (marginal)", float64(grad[f.b.pos(i, tt)*f.k+j]), marg, 1e-5)
			}
		}
	}
}

func TestCRFNLLWithPartialLabels(t *testing.T) {
	lockThread(t)
	f := newCRFFixture(11)
	// Example 1 (4 tokens): known tag 2, an entity of unknown type (any
	// tag but O), an ignored token, known tag 0.
	f.exs[0].targets = []int32{1, 0}
	f.exs[1].targets = []int32{2, anyEntity, ignored, 0}
	f.exs[2].targets = []int32{1}
	g := kit.NewGraph(gotch.CPU)
	defer g.Free()
	nll := f.nll(g)
	want := 0.0
	for id, rows := range f.em {
		y := f.exs[id].targets
		gold := f.bruteLogZ(rows, func(tt, j int) bool {
			switch y[tt] {
			case ignored:
				return true
			case anyEntity:
				return j != 0
			}
			return j == int(y[tt])
		})
		want += f.bruteLogZ(rows, allTags) - gold
	}
	near(t, "nll", kit.Item(nll), want, 1e-5)
}

// nll runs crfNLL on the fixture's targets.
func (f *crfFixture) nll(g *kit.Graph) *ts.Tensor {
	k := int64(f.k)
	gold := make([]int64, f.b.n)
	for i, id := range f.b.ids {
		for tt, y := range f.exs[id].targets {
			gold[f.b.pos(i, tt)] = int64(y)
		}
	}
	return crfNLL(g, g.Floats(f.packed(), int64(f.b.n), k), g.Floats(f.trans, k, k), g.Floats(f.start, k), g.Floats(f.end, k), f.b, gold,
		func() []float32 { return allowedTags(gold, f.k) }, f.k)
}

func TestCRFNLLWithFullLabels(t *testing.T) {
	lockThread(t)
	f := newCRFFixture(5)
	f.exs[0].targets = []int32{1, 0}
	f.exs[1].targets = []int32{2, 2, 1, 0}
	f.exs[2].targets = []int32{1}
	g := kit.NewGraph(gotch.CPU)
	defer g.Free()
	want := 0.0
	for id, rows := range f.em {
		path := make([]int, len(rows))
		for tt, y := range f.exs[id].targets {
			path[tt] = int(y)
		}
		want += f.bruteLogZ(rows, allTags) - f.score(rows, path)
	}
	near(t, "nll", kit.Item(f.nll(g)), want, 1e-5)
}

func TestViterbiAndMarginalsMatchBruteForce(t *testing.T) {
	f := newCRFFixture(3)
	crf := &crfWeights{k: f.k, trans: f.trans, start: f.start, end: f.end}
	for _, rows := range f.em {
		best, bestScore := []int(nil), math.Inf(-1)
		for _, p := range paths(len(rows), f.k) {
			if s := f.score(rows, p); s > bestScore {
				best, bestScore = p, s
			}
		}
		if got := crf.viterbi(rows); !slices.Equal(got, best) {
			t.Errorf("viterbi = %v, brute force %v", got, best)
		}
		z := f.bruteLogZ(rows, allTags)
		for tt, row := range crf.marginals(rows) {
			total := 0.0
			for j, p := range row {
				want := math.Exp(f.bruteLogZ(rows, func(s, c int) bool { return s != tt || c == j }) - z)
				near(t, "marginal", float64(p), want, 1e-6)
				total += float64(p)
			}
			near(t, "marginals' sum", total, 1, 1e-6)
		}
	}
	if crf.viterbi(nil) != nil || crf.marginals(nil) != nil {
		t.Error("empty sentence: want nil")
	}
}

func TestPackedLayout(t *testing.T) {
	f := newCRFFixture(1)
	b := f.b
	// Sorted by decreasing length: example 1 (4), 0 (2), 2 (1).
	if !slices.Equal(b.ids, []int{1, 0, 2}) || !slices.Equal(b.batchSizes, []int64{3, 2, 1, 1}) || b.n != 7 {
		t.Fatalf("ids %v batch sizes %v n %d", b.ids, b.batchSizes, b.n)
	}
	// Token t of sentence i sits at offsets[t]+i.
	want := map[[2]int]int{{0, 0}: 0, {1, 0}: 1, {2, 0}: 2, {0, 1}: 3, {1, 1}: 4, {0, 2}: 5, {0, 3}: 6}
	for it, p := range want {
		if got := b.pos(it[0], it[1]); got != p {
			t.Errorf("pos(%d, %d) = %d, want %d", it[0], it[1], got, p)
		}
	}
	if rows := sentenceRows(f.packed(), b, 1, f.k); len(rows) != 2 || !slices.Equal(rows[1], f.em[0][1]) {
		t.Errorf("sentenceRows of the second sentence: %v", rows)
	}
}

// A partially annotated sentence (missing entities tagged O) trained with
// drop_o 1: every O becomes unobserved, and the loss is -log of the
// marginal likelihood of the entity tags, the paths through the O tokens
// summed over (by enumeration here).
func TestCRFPartialAnnotationMarginalLikelihood(t *testing.T) {
	lockThread(t)
	f := newCRFFixture(5)
	f.exs[0].targets = []int32{0, 2}
	f.exs[1].targets = []int32{1, 0, 0, 2}
	f.exs[2].targets = []int32{0}
	observed := make([][]int32, len(f.exs))
	for i := range f.exs {
		observed[i] = slices.Clone(f.exs[i].targets)
	}
	dropOutside(f.exs, 1, rand.New(rand.NewPCG(1, 2)))
	g := kit.NewGraph(gotch.CPU)
	defer g.Free()
	nll := f.nll(g)
	want := 0.0
	for id, rows := range f.em {
		y := observed[id]
		gold := f.bruteLogZ(rows, func(tt, j int) bool { return y[tt] == 0 || j == int(y[tt]) })
		want += f.bruteLogZ(rows, allTags) - gold
	}
	near(t, "nll", kit.Item(nll), want, 1e-5)
	if err := (TrainConfig{Loss: LossCRF, DropO: 1, Epochs: 1, BatchSize: 1, LearningRate: 1}).validate(CRFHead); err != nil {
		t.Errorf("drop_o 1 with the CRF: %v", err)
	}
}
