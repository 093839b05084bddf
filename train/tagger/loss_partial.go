package tagger

import (
	"math"

	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/stages"
)

// LossPartial is the partial-label CRF for distant labels: the negative log
// marginal likelihood of the observed labels, summing over the tag paths
// they allow, each weighted by how likely the labeler is to have written
// the labels given that path:
//
//	-log sum_y p(y | x) prod_t c(obs_t | y_t)
//
// A gazetteer match is taken as it is (c = 1 for its tag, 0 for any
// other; an unknown-type "?" match allows every entity tag). An unmatched
// token is O evidence of strength miss_rate: c(O | O) = 1 and c(O | entity
// tag) = miss_rate, the chance that a real entity token went unmatched (1
// minus the labels' recall). miss_rate 0 is the plain CRF on the labels;
// miss_rate 1 is the fully partial CRF (drop_o 1), where unmatched tokens say
// nothing and nothing keeps the model from tagging them all as entities.
// In between, the model tags an unmatched token as an entity only where
// its own evidence outweighs the labels' odds 1 : miss_rate for O, which is
// what lets it find the entities a small gazetteer misses without
// unlearning O.
const LossPartial = "partial"

func init() { RegisterLoss(LossPartial, partialLoss{}) }

// partialLoss owns its miss rate.
type partialLoss struct{ missRate float64 }

func (partialLoss) Doc() string {
	return "partial-label CRF: marginal likelihood of the distant labels, an unmatched token O with probability 1 - miss_rate"
}
func (partialLoss) Head() string { return CRFHead }
func (partialLoss) Soft() bool   { return false }

func (partialLoss) Params() []stages.Param {
	return []stages.Param{stages.FloatParam("miss_rate", 0.5, "loss partial: the probability that an entity token was left O by the distant labels (1 - their recall); 0: O is certain, 1: O says nothing", stages.Range(0, 1))}
}

// Configure needs no check of its own: the declared range is miss_rate's
// whole domain.
func (partialLoss) Configure(p stages.Params) (Loss, error) {
	return partialLoss{missRate: p.Float("miss_rate")}, nil
}

func (l partialLoss) Compute(lb *LossBatch) *ts.Tensor {
	if l.missRate == 0 {
		// O is certain: the CRF's own loss, which scores a fully labeled
		// batch by the gold path's score, not a second forward pass.
		return crfLoss{}.Compute(lb)
	}
	gold := packedTargets(lb)
	w := lb.Head.(*crfWeightsOf)
	nll := crfMarginalNLL(lb.G, w.emissions(lb.G, lb.H), w.trans, w.start, w.end, lb.Batch, labelEvidence(gold, lb.K, l.missRate), lb.K)
	return perSentence(lb, nll)
}

// labelEvidence is log c(obs_t | y_t) for every token and tag ([len(gold)*k]):
// allowedTags' mask, except that an observed O allows the entity tags at
// log(missRate) instead of ruling them out.
func labelEvidence(gold []int64, k int, missRate float64) []float32 {
	ev := allowedTags(gold, k)
	if missRate <= 0 {
		return ev
	}
	weak := float32(math.Log(missRate))
	for p, y := range gold {
		if y != 0 {
			continue
		}
		for j := 1; j < k; j++ {
			ev[p*k+j] = weak
		}
	}
	return ev
}
