package train

import (
	"fmt"
	"math"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/ts"
)

// Loss names.
const (
	LossCE  = "ce"  // cross entropy (token head)
	LossGCE = "gce" // generalized cross entropy with Q (token head)
	LossCRF = "crf" // negative log-likelihood (CRF head)
	// LossKL fits soft targets (token head): KL divergence of the
	// entity-vs-O distribution to [p(O), 1 - p(O)] on every token, and of
	// the type distribution to the target's entity tags, renormalized, on
	// tokens where they are not all 0 (RoSTER's ensemble distillation and
	// self-training).
	LossKL = "kl"
)

// checkLoss says whether loss can train a tagger with head.
func checkLoss(loss, head string, q float64) error {
	switch {
	case head == CRFHead && loss != LossCRF:
		return fmt.Errorf("the crf head trains with loss %q only, not %q", LossCRF, loss)
	case head == TokenHead && loss != LossCE && loss != LossGCE && loss != LossKL:
		return fmt.Errorf("the token head trains with loss %q, %q or %q, not %q", LossCE, LossGCE, LossKL, loss)
	case loss == LossGCE && (q <= 0 || q > 1):
		return fmt.Errorf("gce needs 0 < q <= 1, got %v", q)
	}
	return nil
}

// tokenWeights are the per-token loss weights of one example under
// noisy-label removal: entity for the entity-vs-O loss, typ for the type
// loss. nil slices mean weight 1.
type tokenWeights struct {
	entity, typ []float32
}

func weightAt(w []float32, t int) float32 {
	if w == nil {
		return 1
	}
	return w[t]
}

// tokenHeadOutputs computes the token head on encoder output h ([n, in]):
// type logits [n, K-1] and entity-vs-O logits [n, 2] (see binaryLogits).
func (m *Tagger) tokenHeadOutputs(g *graph, h *ts.Tensor) (typ, entity *ts.Tensor) {
	typ = g.t(ts.Linear(h, m.typeW, m.typeB))
	entity = binaryLogits(g, g.t(ts.Linear(h, m.binW, m.binB)))
	return typ, entity
}

// loss is the training loss of a batch of labeled examples: for the token
// head, the entity-vs-O loss over every token plus the type loss over
// entity tokens (as RoSTER), each a weighted mean; for the CRF head, the
// mean negative log-likelihood per sentence. It returns nil when the batch
// has nothing to learn from.
func (m *Tagger) loss(g *graph, h *ts.Tensor, b *batch, exs []example, weights []tokenWeights, lossName string, q float64) *ts.Tensor {
	if m.Config.Head == CRFHead {
		k := m.Labels.NumTags()
		gold := make([]int64, b.n)
		for i, id := range b.ids {
			for t, y := range exs[id].targets {
				gold[b.pos(i, t)] = int64(y)
			}
		}
		em := g.t(ts.Linear(h, m.emitW, m.emitB))
		nll := crfNLL(g, em, m.trans, m.start, m.end, b, gold, func() []float32 { return allowedTags(gold, k) }, k)
		return g.t(nll.MulScalar(g.scalar(1/float64(len(b.ids))), false))
	}

	if lossName == LossKL {
		return m.softLoss(g, h, b, exs)
	}
	entity := make([]int64, b.n)
	entityW := make([]float32, b.n)
	typ := make([]int64, b.n)
	typW := make([]float32, b.n)
	for i, id := range b.ids {
		var w tokenWeights
		if weights != nil {
			w = weights[id]
		}
		for t, y := range exs[id].targets {
			p := b.pos(i, t)
			switch {
			case y == ignored:
			case y == anyEntity:
				entity[p], entityW[p] = 1, weightAt(w.entity, t)
			case y == 0:
				entityW[p] = weightAt(w.entity, t)
			default:
				entity[p], entityW[p] = 1, weightAt(w.entity, t)
				typ[p], typW[p] = int64(y-1), weightAt(w.typ, t)
			}
		}
	}
	typLogits, entityLogits := m.tokenHeadOutputs(g, h)
	lossOf := func(logits *ts.Tensor, y []int64, w []float32) *ts.Tensor {
		if lossName == LossGCE {
			return generalizedCrossEntropy(g, logits, y, w, q)
		}
		return crossEntropy(g, logits, y, w)
	}
	var total *ts.Tensor
	for _, l := range []*ts.Tensor{lossOf(entityLogits, entity, entityW), lossOf(typLogits, typ, typW)} {
		switch {
		case l == nil:
		case total == nil:
			total = l
		default:
			total = g.t(total.Add(l, false))
		}
	}
	return total
}

// softLoss is LossKL on a batch of examples with soft targets.
func (m *Tagger) softLoss(g *graph, h *ts.Tensor, b *batch, exs []example) *ts.Tensor {
	k := m.Labels.NumTags()
	entity := make([]float32, 2*b.n)
	entityW := make([]float32, b.n)
	types := make([]float32, (k-1)*b.n)
	typeW := make([]float32, b.n)
	for i, id := range b.ids {
		for t, s := range exs[id].soft {
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
	typLogits, entityLogits := m.tokenHeadOutputs(g, h)
	total := klDivergence(g, entityLogits, entity, entityW)
	if l := klDivergence(g, typLogits, types, typeW); l != nil {
		total = g.t(total.Add(l, false))
	}
	return total
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

// probabilities returns, for every token of b in packed order, its
// distribution over the tags ([b.n*K]): for the token head
// [1 - sigmoid(z), sigmoid(z) * softmax(type logits)], for the CRF the
// marginals. The CRF also returns its Viterbi paths (per sentence of b);
// the token head's best tags are the argmax of its distribution.
func (m *Tagger) probabilities(g *graph, h *ts.Tensor, b *batch) (probs []float32, paths [][]int) {
	k := m.Labels.NumTags()
	if m.Config.Head == TokenHead {
		typLogits, entityLogits := m.tokenHeadOutputs(g, h)
		pEntity := g.t(entityLogits.Softmax(1, gotch.Float, false)) // [n, 2]
		pO := g.t(pEntity.Narrow(1, 0, 1, false))
		pE := g.t(pEntity.Narrow(1, 1, 1, false))
		pTypes := g.t(g.t(typLogits.Softmax(1, gotch.Float, false)).Mul(pE, false))
		return float32s(g.t(ts.Cat([]*ts.Tensor{pO, pTypes}, 1))), nil
	}
	em := float32s(g.t(ts.Linear(h, m.emitW, m.emitB)))
	crf := m.crfWeights()
	probs = make([]float32, b.n*k)
	for i := range b.ids {
		rows := sentenceRows(em, b, i, k)
		paths = append(paths, crf.viterbi(rows))
		for t, row := range crf.marginals(rows) {
			copy(probs[b.pos(i, t)*k:], row)
		}
	}
	return probs, paths
}

// sentenceRows gathers the rows of sentence i of b from packed values.
func sentenceRows(packed []float32, b *batch, i, k int) [][]float32 {
	n := 0
	for n < len(b.batchSizes) && int(b.batchSizes[n]) > i {
		n++
	}
	rows := make([][]float32, n)
	for t := range n {
		p := b.pos(i, t)
		rows[t] = packed[p*k : (p+1)*k]
	}
	return rows
}

func (m *Tagger) crfWeights() *crfWeights {
	return &crfWeights{k: m.Labels.NumTags(), trans: float32s(m.trans), start: float32s(m.start), end: float32s(m.end)}
}

// argmax returns the index of the largest value.
func argmax(xs []float32) int {
	best, arg := float32(math.Inf(-1)), 0
	for i, x := range xs {
		if x > best {
			best, arg = x, i
		}
	}
	return arg
}
