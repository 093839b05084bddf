package tagger

import (
	"math"
	"testing"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/kit"
)

// The partial-label CRF's loss is -log sum_y p(y) prod_t c(obs_t | y_t),
// checked by enumerating every path of the fixture: an unmatched (O) token
// weighs its entity tags by miss_rate, a known tag rules the others out, an
// unknown-type token rules O out and an ignored token allows every tag. Its
// gradient with respect to the emissions is p(y_t = j) - q(y_t = j), the
// model's marginals minus those of the evidence-weighted posterior q.
func TestPartialLossMatchesEnumeration(t *testing.T) {
	lockThread(t)
	for _, miss := range []float64{0, 0.3, 1} {
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
		c := func(id, tt, j int) float64 {
			switch y := f.exs[id].targets[tt]; {
			case y == ignored:
				return 1
			case y == anyEntity:
				return map[bool]float64{true: 0, false: 1}[j == 0]
			case y == 0 && j != 0:
				return miss
			case int(y) == j:
				return 1
			}
			return 0
		}
		g := kit.NewGraph(gotch.CPU)
		k := int64(f.k)
		em := leaf(t, g, f.packed(), int64(f.b.n), k)
		nll := crfMarginalNLL(g, em, g.Floats(f.trans, k, k), g.Floats(f.start, k), g.Floats(f.end, k), f.b,
			labelEvidence(gold, f.k, miss), f.k)
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
					w *= c(id, tt, j)
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
