package tagger

import (
	"strings"
	"testing"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/kit"
)

// The tag-sets loss is -log of the probability mass of the paths whose
// every token's tag is in its set, per sentence, checked by enumerating
// every path of the fixture: a one-tag set, a two-tag set, a nil row (every
// tag) and a sentence left free altogether (its term is 0). The emissions
// reach the loss through the head's linear layer, set to the identity, so
// that Compute is what is checked.
func TestTagSetsLossMatchesEnumeration(t *testing.T) {
	lockThread(t)
	f := newCRFFixture(29)
	f.exs[0].soft = [][]float32{{0, 1, 0}, nil}
	f.exs[1].soft = [][]float32{{1, 0, 0}, {0, 0.3, 0.7}, nil, {0.5, 0, 0.5}}
	f.exs[2].soft = [][]float32{nil}
	allowed := func(id, tt, j int) bool {
		row := f.exs[id].soft[tt]
		return row == nil || row[j] > 0
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

	want := 0.0
	for _, id := range f.b.ids {
		rows := f.em[id]
		want += f.bruteLogZ(rows, allTags) - f.bruteLogZ(rows, func(tt, j int) bool { return allowed(id, tt, j) })
	}
	near(t, "tag-sets loss", kit.Item(loss), want/3, 1e-5)
	if want < 0.1 {
		t.Fatalf("the fixture's sets hardly constrain the paths (loss %v): the check would not tell them apart", want)
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
