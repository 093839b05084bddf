package tagger

import (
	"slices"
	"testing"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/kit"
)

// Five tokens with three spellings: rows in order of first sight, padded
// to the longest (3).
func TestCharRowsOnePerSpelling(t *testing.T) {
	r := kit.NewCharRows([][]int64{{3, 4}, {5}, {3, 4}, {3, 4, 6}, {5}})
	if r.Rows != 3 || r.Length != 3 {
		t.Fatalf("%d rows of %d, want 3 of 3", r.Rows, r.Length)
	}
	if want := []int64{0, 1, 0, 2, 1}; !slices.Equal(r.Of, want) {
		t.Errorf("rows of the tokens %v, want %v", r.Of, want)
	}
	if want := []int64{3, 4, padChar, 5, padChar, padChar, 3, 4, 6}; !slices.Equal(r.IDs, want) {
		t.Errorf("ids %v, want %v", r.IDs, want)
	}
	if want := []float32{0, 0, -1e4, 0, -1e4, -1e4, 0, 0, 0}; !slices.Equal(r.Mask, want) {
		t.Errorf("mask %v, want %v", r.Mask, want)
	}
	// A prefix is another spelling ({1} against {1, 0}: padChar is an id).
	if r := kit.NewCharRows([][]int64{{1}, {1, padChar}}); r.Rows != 2 {
		t.Errorf("{1} and {1, %d}: %d rows, want 2", padChar, r.Rows)
	}
}

// The CNN over one row per spelling, gathered per token, gives the
// features and the gradients of a row per token.
func TestCharCNNSharedRowsMatchRowPerToken(t *testing.T) {
	lockThread(t)
	tokens := [][]int64{{3, 4}, {5}, {3, 4}, {3, 4, 6}, {5}, {1, 2, 3, 4}, {3, 4}}
	shared := kit.NewCharRows(tokens)
	if shared.Rows != 4 {
		t.Fatalf("%d rows, want 4", shared.Rows)
	}
	// The same tokens a row each, as newCharRows laid them out before
	// spellings were shared.
	perToken := kit.CharRows{Length: shared.Length, Rows: len(tokens), Of: make([]int64, len(tokens))}
	for p, row := range shared.Of {
		perToken.Of[p] = int64(p)
		l := int64(shared.Length)
		perToken.IDs = append(perToken.IDs, shared.IDs[row*l:(row+1)*l]...)
		perToken.Mask = append(perToken.Mask, shared.Mask[row*l:(row+1)*l]...)
	}
	const chars, dim, filters, kernel = 7, 4, 5, 3
	values := func(n int, scale float32) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = scale * float32((i*7)%11-5)
		}
		return out
	}
	type result struct{ feat, gEmb, gConv []float32 }
	runCNN := func(r kit.CharRows) (res result) {
		g := kit.NewGraph(gotch.CPU)
		defer g.Free()
		err := kit.Guard(func() {
			emb := leaf(t, g, values(chars*dim, 0.1), chars, dim)
			convW := leaf(t, g, values(filters*dim*kernel, 0.05), filters, dim, kernel)
			convB := g.Floats(values(filters, 0.01), filters)
			feat := g.CharCNN(emb, convW, convB, r)
			// A weighted sum, so that each token's features count differently.
			w := g.Floats(values(len(tokens)*filters, 0.3), int64(len(tokens)), filters)
			loss := g.T(g.T(feat.Mul(w, false)).Sum(gotch.Float, false))
			res.feat = kit.Float32s(feat)
			g.Check(loss.Backward())
			res.gEmb = kit.Float32s(g.T(emb.Grad(false)))
			res.gConv = kit.Float32s(g.T(convW.Grad(false)))
		})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	got, want := runCNN(shared), runCNN(perToken)
	for _, c := range []struct {
		what      string
		got, want []float32
	}{{"features", got.feat, want.feat}, {"character vectors' gradient", got.gEmb, want.gEmb}, {"convolution's gradient", got.gConv, want.gConv}} {
		if len(c.got) != len(c.want) {
			t.Fatalf("%s: %d values, want %d", c.what, len(c.got), len(c.want))
		}
		for i := range c.want {
			near(t, c.what, float64(c.got[i]), float64(c.want[i]), 1e-5)
		}
	}
	if len(want.feat) != len(tokens)*filters {
		t.Errorf("%d features, want %d", len(want.feat), len(tokens)*filters)
	}
}

// A prediction's table of spellings, computed in chunks, gives each batch
// the hidden states that the batch's own rows give.
func TestCharTableMatchesBatchRows(t *testing.T) {
	c := fixtureCorpus(fixture)
	m := newTiny(t, c, tinyConfig(TokenHead, "io"), 3)
	exs, err := m.encodeCorpus(c, false)
	if err != nil {
		t.Fatal(err)
	}
	batches := lengthBatches(exs, 2)
	if len(batches) < 2 {
		t.Fatalf("%d batches, the test needs several", len(batches))
	}
	kit.OnComputeThread(func(func()) {
		tableGraph := kit.NewGraph(gotch.CPU)
		defer tableGraph.Free()
		var table charTable
		kit.NoGrad(func() {
			if err := kit.Guard(func() { table = m.newCharTable(tableGraph, exs, batches, 3) }); err != nil {
				t.Fatal(err)
			}
			if n, _ := table.features.Size(); n[0] <= 3 {
				t.Fatalf("%d spellings: the test wants several chunks of 3", n[0])
			}
			hidden := func(b *Batch) []float32 {
				g := kit.NewGraph(gotch.CPU)
				defer g.Free()
				var h []float32
				if err := kit.Guard(func() { h = kit.Float32s(m.forward(g, b, false, nil)) }); err != nil {
					t.Fatal(err)
				}
				return h
			}
			for _, ids := range batches {
				own := newBatch(exs, ids)
				shared, _ := packBatch(exs, ids)
				shared.chars = table.rows(shared)
				want, got := hidden(own), hidden(shared)
				if len(got) != len(want) {
					t.Fatalf("batch %v: %d values, want %d", ids, len(got), len(want))
				}
				for i := range want {
					near(t, "hidden state", float64(got[i]), float64(want[i]), 1e-5)
				}
			}
		})
	})
}

// A token's character features do not depend on the longest word beside
// it, after training too: padding's character vector is zero and stays so.
func TestCharFeaturesIgnorePadding(t *testing.T) {
	c := fixtureCorpus(fixture)
	m := newTiny(t, c, tinyConfig(TokenHead, "io"), 1)
	checkLossFalls(t, m, tinyTrainConfig(LossGCE), c)
	kit.OnComputeThread(func(func()) {
		g := kit.NewGraph(gotch.CPU)
		defer g.Free()
		err := kit.Guard(func() {
			kit.NoGrad(func() {
				dim := m.Config.CharDim
				if pad := kit.Float32s(m.charEmb)[padChar*dim : (padChar+1)*dim]; slices.ContainsFunc(pad, func(v float32) bool { return v != 0 }) {
					t.Errorf("padding's character vector after training: %v, want zeros", pad)
				}
				alone := kit.Float32s(g.CharCNN(m.charEmb, m.convW, m.convB, kit.NewCharRows([][]int64{{3, 4}})))
				beside := kit.Float32s(g.CharCNN(m.charEmb, m.convW, m.convB, kit.NewCharRows([][]int64{{3, 4}, {5, 6, 3, 7, 4}})))
				for i := range alone {
					near(t, "feature", float64(beside[i]), float64(alone[i]), 1e-6)
				}
			})
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}
