package train

import (
	"fmt"

	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/corpus"
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

// augmentedLoss is the type term of loss kl on the augmented batch.
func augmentedLoss(lb *lossBatch) *ts.Tensor {
	_, _, types, typeW := klTargets(lb)
	typLogits, _ := lb.head.(*tokenWeightsOf).outputs(lb.g, lb.h)
	return klDivergence(lb.g, typLogits, types, typeW)
}
