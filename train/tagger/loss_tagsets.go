package tagger

import (
	"fmt"
	"math"

	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/kit"
)

// LossTagSets is the partial-label CRF on weighted sets of tags given as
// soft targets (WithSoftTargets' layout): a row's value v_j > 0 is evidence
// of weight c_t(j) = v_j / max_i v_i for tag j, a value 0 (or below) rules
// the tag out, a nil row allows every tag at weight 1, and the loss is the
// negative log of the evidence-weighted mass of the paths,
//
//	-log sum_y p(y | x) prod_t c_t(y_t),
//
// per sentence. It is how a CRF student learns a CRF teacher's
// pseudo-labels (package selftrain): a confident token's set is the
// teacher's tag, an uncertain token's set leaves the student free, so the
// student fits the teacher where it is sure and its own transitions fill in
// the rest. Rows of 0 and 1 are plain sets, every path within them at
// weight 1. A value between 0 and the row's largest is a weak tag, as loss
// partial weighs the entity tags of a distant O by miss_rate: a teacher's
// O row [1, m, m, ...] lets the student tag the token as an entity where its
// own evidence outweighs the odds 1 : m. The values are evidence weights,
// not a distribution to fit (the likelihood of a weighted sum of paths is
// maximized by putting the mass on the best-weighted ones, not by matching
// the weights), and only their ratio within a row counts.
const LossTagSets = "tag_sets"

func init() { RegisterLoss(LossTagSets, tagSetsLoss{}) }

type tagSetsLoss struct{}

func (tagSetsLoss) Doc() string {
	return "partial-label CRF on the tag sets of soft targets (a token's tags above 0, each weighted by its value over the row's largest; a nil row any tag): evidence-weighted marginal likelihood of the paths within them (a CRF student's self-training)"
}
func (tagSetsLoss) Head() string { return CRFHead }
func (tagSetsLoss) Soft() bool   { return true }

func (tagSetsLoss) Compute(lb *LossBatch) *ts.Tensor {
	w := lb.Head.(*crfWeightsOf)
	nll := crfMarginalNLL(lb.G, w.emissions(lb.G, lb.H), w.trans, w.start, w.end, lb.Batch, tagSetEvidence(lb.exs, lb.Batch, lb.K), lb.K)
	return perSentence(lb, nll)
}

// tagSetEvidence is log c_t(j) for every token and tag of batch b ([b.n*k]
// in packed order): log(v_j / max of the row) for a value above 0,
// notAllowed for the others, 0 for every tag of a nil row. A row's largest
// value gets exactly 0, so a row of 0s and 1s is the plain set. A row
// without any tag above 0 would rule out every path; attachSoft lets it
// through (LossKL reads it as a token left out of the type loss), so it is
// refused here.
func tagSetEvidence(exs []example, b *Batch, k int) []float32 {
	ev := make([]float32, b.n*k)
	for i, id := range b.ids {
		for t, row := range exs[id].soft {
			if row == nil {
				continue // every tag
			}
			p := b.pos(i, t)
			top := float32(0)
			for _, x := range row {
				top = max(top, x)
			}
			if !(top > 0) {
				kit.Abort(fmt.Errorf("loss %s: example %d, token %d: no tag above 0 in its target %v", LossTagSets, id+1, t+1, row))
			}
			for j, x := range row {
				switch {
				case !(x > 0):
					ev[p*k+j] = notAllowed
				case x < top:
					ev[p*k+j] = float32(math.Log(float64(x) / float64(top)))
				}
			}
		}
	}
	return ev
}
