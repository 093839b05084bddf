package tagger

import "github.com/sugarme/gotch/ts"

// LossKL fits soft targets (token head): KL divergence of the entity-vs-O
// distribution to [p(O), 1 - p(O)] on every token, and of the type
// distribution to the target's entity tags, renormalized, on tokens where
// they are not all 0 (RoSTER's ensemble distillation and self-training).
const LossKL = "kl"

func init() { RegisterLoss(LossKL, klLoss{}) }

type klLoss struct{}

func (klLoss) Doc() string {
	return "KL divergence to the soft targets of the input soft (distillation, self-training)"
}
func (klLoss) Head() string { return TokenHead }
func (klLoss) Soft() bool   { return true }

func (klLoss) Compute(lb *LossBatch) *ts.Tensor {
	entity, entityW, types, typeW := klTargets(lb)
	typLogits, entityLogits := lb.TokenOutputs()
	return addLosses(lb.G, klDivergence(lb.G, entityLogits, entity, entityW), klDivergence(lb.G, typLogits, types, typeW))
}

// klTargets lays out the batch's soft targets: [p(O), 1 - p(O)] with
// weight 1 on every token that has a target (not a nil row), and the
// entity tags renormalized, with weight 1 where they are not all 0.
func klTargets(lb *LossBatch) (entity, entityW, types, typeW []float32) {
	b, k := lb.Batch, lb.K
	entity, entityW = make([]float32, 2*b.n), make([]float32, b.n)
	types, typeW = make([]float32, (k-1)*b.n), make([]float32, b.n)
	for i, id := range b.ids {
		for t, s := range lb.exs[id].soft {
			if s == nil {
				continue // weight 0 in both terms
			}
			p := b.pos(i, t)
			entity[2*p], entity[2*p+1], entityW[p] = s[0], 1-s[0], 1
			total := float32(0)
			for _, x := range s[1:] {
				total += x
			}
			if total > 0 {
				typeW[p] = 1
				for c, x := range s[1:] {
					types[p*(k-1)+c] = x / total
				}
			}
		}
	}
	return entity, entityW, types, typeW
}
