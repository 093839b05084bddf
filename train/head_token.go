package train

import (
	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/ts"
)

// TokenHead is RoSTER's token classifier: a linear "entity vs not" score
// and a linear softmax over the entity tags, combined into one distribution
// over the tags (O = not entity).
const TokenHead = "token"

func init() { RegisterHead(TokenHead, tokenHead{}) }

type tokenHead struct{}

func (tokenHead) Doc() string {
	return "RoSTER's entity-vs-O and type classifier"
}

func (tokenHead) newWeights(p *initializer, in int, labels *Labels, _ Config) headWeights {
	k := labels.NumTags()
	out := 1 / sqrt(in)
	return &tokenWeightsOf{
		typeW: p.uniform("type_w", out, k-1, in), typeB: p.uniform("type_b", out, k-1),
		binW: p.uniform("entity_w", out, 1, in), binB: p.uniform("entity_b", out, 1),
	}
}

// tokenWeightsOf are the token head's weights.
type tokenWeightsOf struct {
	typeW, typeB, binW, binB *ts.Tensor
}

// outputs computes the head on encoder output h ([n, in]): type logits
// [n, K-1] and entity-vs-O logits [n, 2] (see binaryLogits).
func (w *tokenWeightsOf) outputs(g *graph, h *ts.Tensor) (typ, entity *ts.Tensor) {
	typ = g.t(ts.Linear(h, w.typeW, w.typeB))
	entity = binaryLogits(g, g.t(ts.Linear(h, w.binW, w.binB)))
	return typ, entity
}

// probabilities is [1 - sigmoid(z), sigmoid(z) * softmax(type logits)].
func (w *tokenWeightsOf) probabilities(g *graph, h *ts.Tensor, _ *batch, _ int) ([]float32, [][]int) {
	typLogits, entityLogits := w.outputs(g, h)
	pEntity := g.t(entityLogits.Softmax(1, gotch.Float, false)) // [n, 2]
	pO := g.t(pEntity.Narrow(1, 0, 1, false))
	pE := g.t(pEntity.Narrow(1, 1, 1, false))
	pTypes := g.t(g.t(typLogits.Softmax(1, gotch.Float, false)).Mul(pE, false))
	return float32s(g.t(ts.Cat([]*ts.Tensor{pO, pTypes}, 1))), nil
}
