package train

import "github.com/sugarme/gotch/ts"

// LossCRF is the CRF's negative log-likelihood per sentence (CRF head).
const LossCRF = "crf"

func init() { RegisterLoss(LossCRF, crfLoss{}) }

type crfLoss struct{}

func (crfLoss) Doc() string             { return "negative log-likelihood of the tags, mean per sentence" }
func (crfLoss) Head() string            { return CRFHead }
func (crfLoss) Soft() bool              { return false }
func (crfLoss) Check(TrainConfig) error { return nil }

func (crfLoss) compute(lb *lossBatch) *ts.Tensor {
	b, k, g := lb.b, lb.k, lb.g
	gold := make([]int64, b.n)
	for i, id := range b.ids {
		for t, y := range lb.exs[id].targets {
			gold[b.pos(i, t)] = int64(y)
		}
	}
	w := lb.head.(*crfWeightsOf)
	nll := crfNLL(g, w.emissions(g, lb.h), w.trans, w.start, w.end, b, gold, func() []float32 { return allowedTags(gold, k) }, k)
	return g.t(nll.MulScalar(g.scalar(1/float64(len(b.ids))), false))
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
