package tagger

import (
	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/kit"
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

func (tokenHead) NewWeights(p *kit.Initializer, in int, labels *Labels, _ Config) HeadWeights {
	k := labels.NumTags()
	out := 1 / sqrt(in)
	return &tokenWeightsOf{
		typeW: p.Uniform("type_w", out, k-1, in), typeB: p.Uniform("type_b", out, k-1),
		binW: p.Uniform("entity_w", out, 1, in), binB: p.Uniform("entity_b", out, 1),
	}
}

// tokenWeightsOf are the token head's weights.
type tokenWeightsOf struct {
	typeW, typeB, binW, binB *ts.Tensor
}

// outputs computes the head on encoder output h ([n, in]): type logits
// [n, K-1] and entity-vs-O logits [n, 2] (see binaryLogits).
func (w *tokenWeightsOf) Outputs(g *kit.Graph, h *ts.Tensor) (typ, entity *ts.Tensor) {
	typ = g.T(ts.Linear(h, w.typeW, w.typeB))
	entity = binaryLogits(g, g.T(ts.Linear(h, w.binW, w.binB)))
	return typ, entity
}

// probabilities is [1 - sigmoid(z), sigmoid(z) * softmax(type logits)].
func (w *tokenWeightsOf) Probabilities(g *kit.Graph, h *ts.Tensor, _ *Batch, _ int) ([]float32, [][]int) {
	typLogits, entityLogits := w.Outputs(g, h)
	pEntity := g.T(entityLogits.Softmax(1, gotch.Float, false)) // [n, 2]
	pO := g.T(pEntity.Narrow(1, 0, 1, false))
	pE := g.T(pEntity.Narrow(1, 1, 1, false))
	pTypes := g.T(g.T(typLogits.Softmax(1, gotch.Float, false)).Mul(pE, false))
	return kit.Float32s(g.T(ts.Cat([]*ts.Tensor{pO, pTypes}, 1))), nil
}
