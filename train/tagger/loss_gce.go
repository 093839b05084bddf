package tagger

import (
	"fmt"

	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/kit"
)

// LossGCE is generalized cross entropy with exponent Q (token head), robust
// to noisy labels.
const LossGCE = "gce"

func init() { RegisterLoss(LossGCE, gceLoss{}) }

type gceLoss struct{}

func (gceLoss) Doc() string {
	return "generalized cross entropy with exponent q, robust to noisy labels"
}
func (gceLoss) Head() string { return TokenHead }
func (gceLoss) Soft() bool   { return false }

func (gceLoss) Check(cfg TrainConfig) error {
	if cfg.Q <= 0 || cfg.Q > 1 {
		return fmt.Errorf("gce needs 0 < q <= 1, got %v", cfg.Q)
	}
	return nil
}

func (gceLoss) Compute(lb *LossBatch) *ts.Tensor {
	return hardTokenLoss(lb, func(g *kit.Graph, logits *ts.Tensor, y []int64, w []float32) *ts.Tensor {
		return generalizedCrossEntropy(g, logits, y, w, lb.Config.Q)
	})
}
