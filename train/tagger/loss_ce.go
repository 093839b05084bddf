package tagger

import "github.com/sugarme/gotch/ts"

// LossCE is cross entropy on hard labels (token head).
const LossCE = "ce"

func init() { RegisterLoss(LossCE, ceLoss{}) }

type ceLoss struct{}

func (ceLoss) Doc() string                      { return "cross entropy" }
func (ceLoss) Head() string                     { return TokenHead }
func (ceLoss) Soft() bool                       { return false }
func (ceLoss) Check(TrainConfig) error          { return nil }
func (ceLoss) Compute(lb *LossBatch) *ts.Tensor { return hardTokenLoss(lb, crossEntropy) }
