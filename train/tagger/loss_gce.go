package tagger

import (
	"fmt"

	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/kit"
	"github.com/nerflow/nerflow/stages"
)

// LossGCE is generalized cross entropy with exponent q (token head),
// robust to noisy labels.
const LossGCE = "gce"

func init() { RegisterLoss(LossGCE, gceLoss{}) }

// gceLoss owns its exponent and its noisy-label removal
// (noisyLabelRemoval), RoSTER's pair.
type gceLoss struct {
	q       float64
	removes noisyLabelRemoval
}

func (gceLoss) Doc() string {
	return "generalized cross entropy with exponent q, robust to noisy labels"
}
func (gceLoss) Head() string                 { return TokenHead }
func (gceLoss) Soft() bool                   { return false }
func (l gceLoss) removal() noisyLabelRemoval { return l.removes }

func (gceLoss) Params() []stages.Param {
	return append([]stages.Param{stages.FloatParam("q", 0.7, "exponent of generalized cross entropy", stages.Range(0, 1))}, removalParams()...)
}

func (gceLoss) Configure(p stages.Params) (Loss, error) {
	l := gceLoss{q: p.Float("q")}
	if l.q <= 0 || l.q > 1 {
		return nil, fmt.Errorf("gce needs 0 < q <= 1, got %v", l.q)
	}
	var err error
	l.removes, err = removalOf(p)
	return l, err
}

func (l gceLoss) Compute(lb *LossBatch) *ts.Tensor {
	return hardTokenLoss(lb, func(g *kit.Graph, logits *ts.Tensor, y []int64, w []float32) *ts.Tensor {
		return generalizedCrossEntropy(g, logits, y, w, l.q)
	})
}
