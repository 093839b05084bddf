package tagger

import (
	"fmt"

	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/kit"
)

// LossTagSets is the partial-label CRF on sets of tags given as soft
// targets (WithSoftTargets' layout): the tags a token may have are those
// its row gives a value above 0, a nil row allows every tag, and the loss is
// the negative log probability that the path lies within the sets,
//
//	-log sum_{y : y_t in S_t for every t} p(y | x),
//
// per sentence. It is how a CRF student learns a CRF teacher's
// pseudo-labels (package selftrain): a confident token's set is the
// teacher's tag, an uncertain token's set leaves the student free, so the
// student fits the teacher where it is sure and its own transitions fill in
// the rest. The rows' values beyond being 0 or not are not used: a soft
// evidence weight would not make the student fit a distribution either
// (the likelihood of a weighted sum of paths is maximized by the single
// best-weighted path), so the sets say what the teacher rules out.
const LossTagSets = "tag_sets"

func init() { RegisterLoss(LossTagSets, tagSetsLoss{}) }

type tagSetsLoss struct{}

func (tagSetsLoss) Doc() string {
	return "partial-label CRF on the tag sets of soft targets (a token's tags above 0, a nil row any tag): marginal likelihood of the paths within them (a CRF student's self-training)"
}
func (tagSetsLoss) Head() string { return CRFHead }
func (tagSetsLoss) Soft() bool   { return true }

func (tagSetsLoss) Compute(lb *LossBatch) *ts.Tensor {
	w := lb.Head.(*crfWeightsOf)
	nll := crfMarginalNLL(lb.G, w.emissions(lb.G, lb.H), w.trans, w.start, w.end, lb.Batch, tagSetEvidence(lb.exs, lb.Batch, lb.K), lb.K)
	return perSentence(lb, nll)
}

// tagSetEvidence is the CRF's mask of the tags each token of batch b may
// have under its soft targets ([b.n*k] in packed order, 0 or notAllowed).
// A row without any tag above 0 would rule out every path; attachSoft lets
// it through (LossKL reads it as a token left out of the type loss), so it
// is refused here.
func tagSetEvidence(exs []example, b *Batch, k int) []float32 {
	ev := make([]float32, b.n*k)
	for i, id := range b.ids {
		for t, row := range exs[id].soft {
			if row == nil {
				continue // every tag
			}
			p := b.pos(i, t)
			some := false
			for j, x := range row {
				if x > 0 {
					some = true
				} else {
					ev[p*k+j] = notAllowed
				}
			}
			if !some {
				kit.Abort(fmt.Errorf("loss %s: example %d, token %d: no tag above 0 in its target %v", LossTagSets, id+1, t+1, row))
			}
		}
	}
	return ev
}
