package tagger

import "github.com/sugarme/gotch/ts"

// LossCRF is the CRF's negative log-likelihood per sentence (CRF head).
const LossCRF = "crf"

func init() { RegisterLoss(LossCRF, crfLoss{}) }

type crfLoss struct{}

func (crfLoss) Doc() string  { return "negative log-likelihood of the tags, mean per sentence" }
func (crfLoss) Head() string { return CRFHead }
func (crfLoss) Soft() bool   { return false }

func (crfLoss) Compute(lb *LossBatch) *ts.Tensor {
	gold := packedTargets(lb)
	w := lb.Head.(*crfWeightsOf)
	nll := crfNLL(lb.G, w.emissions(lb.G, lb.H), w.trans, w.start, w.end, lb.Batch, gold, func() []float32 { return allowedTags(gold, lb.K) }, lb.K)
	return perSentence(lb, nll)
}

// packedTargets lays the batch's targets out in its packed order.
func packedTargets(lb *LossBatch) []int64 {
	gold := make([]int64, lb.Batch.n)
	for i, id := range lb.Batch.ids {
		for t, y := range lb.exs[id].targets {
			gold[lb.Batch.pos(i, t)] = int64(y)
		}
	}
	return gold
}

// perSentence turns a batch's summed negative log-likelihood into its mean
// per sentence.
func perSentence(lb *LossBatch, nll *ts.Tensor) *ts.Tensor {
	return lb.G.T(nll.MulScalar(lb.G.Scalar(1/float64(len(lb.Batch.ids))), false))
}

// allowedTags is the CRF's mask of the tags each token's label allows
// ([len(gold)*k], 0 or notAllowed): its tag when known, any entity tag for
// an entity of unknown type, any tag for an ignored token.
func allowedTags(gold []int64, k int) []float32 {
	allowed := make([]float32, len(gold)*k)
	for p, y := range gold {
		row := allowed[p*k : (p+1)*k]
		for j := range row {
			if (y >= 0 && j != int(y)) || (y == anyEntity && j == 0) {
				row[j] = notAllowed
			}
		}
	}
	return allowed
}
