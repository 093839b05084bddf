package tagger

import (
	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/stages"
)

// LossCE is cross entropy on hard labels (token head).
const LossCE = "ce"

func init() { RegisterLoss(LossCE, ceLoss{}) }

// ceLoss owns its noisy-label removal (noisyLabelRemoval).
type ceLoss struct{ removes noisyLabelRemoval }

func (ceLoss) Doc() string                      { return "cross entropy" }
func (ceLoss) Head() string                     { return TokenHead }
func (ceLoss) Soft() bool                       { return false }
func (ceLoss) Params() []stages.Param           { return removalParams() }
func (l ceLoss) removal() noisyLabelRemoval     { return l.removes }
func (ceLoss) Compute(lb *LossBatch) *ts.Tensor { return hardTokenLoss(lb, crossEntropy) }

func (ceLoss) Configure(p stages.Params) (Loss, error) {
	r, err := removalOf(p)
	return ceLoss{removes: r}, err
}
