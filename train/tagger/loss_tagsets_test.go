package tagger

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/kit"
)

// The tag-sets loss is -log of the evidence-weighted probability mass of
// the paths, sum_y p(y) prod_t c_t(y_t) with c_t(j) = row_j / max of the
// row, per sentence, checked by enumerating every path of the fixture: a
// one-tag set, a teacher's weak O (O at 1, the entity tags at 0.25), a
// two-tag set of unequal weights (LOC at 0.3 / 0.7 of PER), a plain
// two-tag set at 0.5 each, a nil row (every tag) and a sentence left free
// altogether (its term is 0). The emissions reach the loss through the
// head's linear layer, set to the identity, so that Compute is what is
// checked.
func TestTagSetsLossMatchesEnumeration(t *testing.T) {
	lockThread(t)
	f := newCRFFixture(29)
	f.exs[0].soft = [][]float32{{0, 1, 0}, {1, 0.25, 0.25}}
	f.exs[1].soft = [][]float32{{1, 0, 0}, {0, 0.3, 0.7}, nil, {0.5, 0, 0.5}}
	f.exs[2].soft = [][]float32{nil}
	weight := func(id, tt, j int) float64 {
		row := f.exs[id].soft[tt]
		if row == nil {
			return 1
		}
		return float64(row[j]) / float64(slices.Max(row))
	}
	g := kit.NewGraph(gotch.CPU)
	defer g.Free()
	k := int64(f.k)
	eye := make([]float32, f.k*f.k)
	for j := range f.k {
		eye[j*f.k+j] = 1
	}
	w := &crfWeightsOf{emitW: g.Floats(eye, k, k), emitB: g.Floats(make([]float32, f.k), k),
		trans: g.Floats(f.trans, k, k), start: g.Floats(f.start, k), end: g.Floats(f.end, k)}
	h := leaf(t, g, f.packed(), int64(f.b.n), k)
	lb := &LossBatch{G: g, Head: w, H: h, Batch: f.b, K: f.k, exs: f.exs}
	loss := tagSetsLoss{}.Compute(lb)

	want, asSets := 0.0, 0.0
	for _, id := range f.b.ids {
		rows := f.em[id]
		z := f.bruteLogZ(rows, allTags)
		mass := 0.0
		for _, p := range paths(len(rows), f.k) {
			m := math.Exp(f.score(rows, p) - z)
			for tt, j := range p {
				m *= weight(id, tt, j)
			}
			mass += m
		}
		want -= math.Log(mass)
		asSets += z - f.bruteLogZ(rows, func(tt, j int) bool { return weight(id, tt, j) > 0 })
	}
	near(t, "tag-sets loss", kit.Item(loss), want/3, 1e-5)
	if asSets < 0.1 || want-asSets < 0.1 {
		t.Fatalf("the fixture's sets hardly constrain the paths (loss %v, %v read as plain sets): the check would not tell them apart", want, asSets)
	}
}

// Rows of 0s and 1s are plain sets, in the loss's evidence exactly 0 for a
// tag in the set and notAllowed for the others; a weighted row gets the log
// of each value over the row's largest, whatever the row's scale.
func TestTagSetsEvidenceOfPlainAndWeightedRows(t *testing.T) {
	f := newCRFFixture(3)
	f.exs[0].soft = [][]float32{{0, 1, 0}, {1, 1, 0}}
	f.exs[1].soft = [][]float32{nil, {1, 1, 1}, {1, 0, 0}, {2, 0.5, 0}}
	f.exs[2].soft = [][]float32{{1, 0.25, 0.25}}
	ev := tagSetEvidence(f.exs, f.b, f.k)
	q := float32(math.Log(0.25))
	want := map[[2]int][]float32{
		{0, 0}: {notAllowed, 0, notAllowed}, {0, 1}: {0, 0, notAllowed},
		{1, 0}: {0, 0, 0}, {1, 1}: {0, 0, 0}, {1, 2}: {0, notAllowed, notAllowed}, {1, 3}: {0, q, notAllowed},
		{2, 0}: {0, q, q},
	}
	for i, id := range f.b.ids {
		for tt := range f.exs[id].soft {
			p := f.b.pos(i, tt)
			if got := ev[p*f.k : (p+1)*f.k]; !slices.Equal(got, want[[2]int{id, tt}]) {
				t.Errorf("example %d, token %d (row %v): evidence %v, want %v", id+1, tt+1, f.exs[id].soft[tt], got, want[[2]int{id, tt}])
			}
		}
	}
}

// A row with no tag above 0 allows no path: an error, not a loss of 1e9.
func TestTagSetsLossRefusesAnEmptySet(t *testing.T) {
	lockThread(t)
	f := newCRFFixture(3)
	f.exs[1].soft = [][]float32{nil, {0, 0, 0}, nil, nil}
	err := kit.Guard(func() { tagSetEvidence(f.exs, f.b, f.k) })
	if err == nil || !strings.Contains(err.Error(), "example 2, token 2: no tag above 0") {
		t.Errorf("error %v, want one naming example 2, token 2", err)
	}
}
