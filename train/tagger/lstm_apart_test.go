package tagger

import (
	"math"
	"slices"
	"testing"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/kit"
)

// Sentences of lengths 3, 2 and 1 in packed order: positions 0 1 2 hold
// their first tokens, 3 4 the second ones, 5 the last of the first.
func TestReversedOrder(t *testing.T) {
	b := &Batch{ids: []int{0, 1, 2}, batchSizes: []int64{3, 2, 1}, offsets: []int{0, 3, 5}, n: 6}
	got := b.reversedOrder()
	if want := []int64{5, 4, 2, 3, 1, 0}; !slices.Equal(got, want) {
		t.Fatalf("reversedOrder = %v, want %v", got, want)
	}
}

// Prediction with the two directions apart (2 threads) computes what the
// fused bidirectional op computes (1 thread), through two stacked layers.
func TestLSTMDirectionsApartMatchesFusedOp(t *testing.T) {
	c := fixtureCorpus(fixture)
	cfg := tinyConfig(TokenHead, "io")
	cfg.Layers = 2
	m := newTiny(t, c, cfg, 3)
	exs, err := m.encodeCorpus(c, false)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int
	for i, e := range exs {
		if e.len() > 0 {
			ids = append(ids, i)
		}
	}
	b := newBatch(exs, ids)
	if b.batchSizes[0] == b.batchSizes[len(b.batchSizes)-1] {
		t.Fatal("the fixture's sentences all have one length: the test needs several")
	}
	hidden := func(threads int) []float32 {
		var out []float32
		kit.OnComputeThread(func(func()) {
			kit.SetThreads(threads)
			defer kit.SetThreads(0)
			helper, restore := kit.LSTMHelperFor(m.device, kit.LSTMApartMinBatches)
			defer restore()
			if (helper != nil) != (threads >= kit.LSTMApartMinThreads) {
				t.Errorf("%d threads: helper %v", threads, helper)
			}
			kit.NoGrad(func() {
				g := kit.NewGraph(gotch.CPU)
				g.LSTMHelper = helper
				defer g.Free()
				if err := kit.Guard(func() { out = kit.Float32s(m.forward(g, b, false, nil)) }); err != nil {
					t.Error(err)
				}
			})
		})
		return out
	}
	fused, apart := hidden(1), hidden(kit.LSTMApartMinThreads)
	if len(fused) != b.n*2*cfg.Hidden || len(apart) != len(fused) {
		t.Fatalf("%d and %d values, want %d", len(fused), len(apart), b.n*2*cfg.Hidden)
	}
	worst := 0.0
	for i := range fused {
		worst = max(worst, math.Abs(float64(fused[i]-apart[i])))
	}
	if worst > 1e-5 {
		t.Errorf("directions apart differ from the fused op by up to %g", worst)
	}
}
