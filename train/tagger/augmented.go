package tagger

import (
	"fmt"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/kit"
)

// WithAugmented adds RoSTER's augmented-sentence term to loss kl: before
// every epoch, augment returns a copy of the training sentences, aligned
// token for token (a token may be replaced, never added or removed), and
// every step adds the KL divergence of the type head on the augmented
// sentences of the batch to the same type targets as their originals. The
// entity-vs-O term stays on the originals only.
func WithAugmented(augment func(epoch int) ([]corpus.Sentence, error)) TrainerOption {
	return func(t *Trainer) { t.augment = augment }
}

// augmentedExamples encodes the epoch's augmented copy of exs.
func (t *Trainer) augmentedExamples(epoch int, exs []example) ([]example, error) {
	sents, err := t.augment(epoch)
	if err != nil {
		return nil, fmt.Errorf("augmented sentences: %w", err)
	}
	if len(sents) != len(exs) {
		return nil, fmt.Errorf("augmented sentences: %d for %d training sentences", len(sents), len(exs))
	}
	out := make([]example, len(sents))
	for i, s := range sents {
		if len(s.Tokens) != exs[i].len() {
			return nil, fmt.Errorf("augmented sentence %d: %d tokens, its original %d", i+1, len(s.Tokens), exs[i].len())
		}
		if out[i], err = t.model.encodeSentence(s, false); err != nil {
			return nil, fmt.Errorf("augmented sentence %d: %w", i+1, err)
		}
	}
	return out, nil
}

// withTargetsOf gives the augmented examples of ids the current soft
// targets of their originals (which refreshes replace).
func withTargetsOf(aug, exs []example, ids []int) {
	for _, id := range ids {
		aug[id].soft = exs[id].soft
	}
}

// augmentedLoss is the type term of loss kl on the augmented batch lb, on
// the tokens whose most probable type is the same as in the original batch
// orig (RoSTER's released code keeps only those: a replacement that
// changes the type the model sees likely changed the word's type, and its
// target would then be wrong).
func augmentedLoss(lb, orig *LossBatch) *ts.Tensor {
	_, _, types, typeW := klTargets(lb)
	typLogits, _ := lb.TokenOutputs()
	origLogits, _ := orig.TokenOutputs()
	return klDivergenceWhere(lb.G, typLogits, types, typeW, sameArgmax(lb.G, typLogits, origLogits))
}

// sameArgmax is 1 on the rows of a and b ([n, C]) whose largest value is
// in the same column, 0 elsewhere, as a float [n]. No gradient flows
// through it.
func sameArgmax(g *kit.Graph, a, b *ts.Tensor) *ts.Tensor {
	ia := g.T(a.Argmax([]int64{1}, false, false))
	ib := g.T(b.Argmax([]int64{1}, false, false))
	return g.T(g.T(ia.EqTensor(ib, false)).Totype(gotch.Float, false))
}
