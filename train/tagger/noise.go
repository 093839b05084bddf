package tagger

import (
	"fmt"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/kit"
	"github.com/nerflow/nerflow/stages"
)

// noisyLabelRemoval is the setting of RoSTER's noisy-label removal
// (removeNoisyLabels): every interval batches (0: never) the model judges
// the training labels, and a label it gives a probability of tau or less
// is switched off.
//
// It belongs to the token head's losses on hard labels, ce and gce, which
// declare its parameters (removalParams) and own its setting
// (removesNoisyLabels), rather than to gce alone or to the trainer: it
// judges a label by the token head's own entity-vs-O and type
// probabilities, and it acts by zeroing the per-token weights of
// hardTokenLoss, the terms that ce and gce alike are made of (RoSTER pairs
// it with gce, but it is as sound with cross entropy). A CRF or span loss
// has no per-token terms to switch off, and soft targets no label to
// doubt.
type noisyLabelRemoval struct {
	interval int
	tau      float64
}

// removalParams declares noisyLabelRemoval's parameters, once for the
// losses that own it.
func removalParams() []stages.Param {
	return []stages.Param{
		stages.FloatParam("tau", 0.7, "noisy-label removal: a distant label the model gives at most this probability is noise", stages.Range(0, 1)),
		stages.IntParam("update_interval", 0, "batches between noisy-label removals (0: no removal)", stages.AtLeast(0)),
	}
}

// removalOf reads removalParams' values.
func removalOf(p stages.Params) (noisyLabelRemoval, error) {
	r := noisyLabelRemoval{interval: p.Int("update_interval"), tau: p.Float("tau")}
	if r.interval > 0 && (r.tau <= 0 || r.tau >= 1) {
		return r, fmt.Errorf("tau %v, want (0, 1)", r.tau)
	}
	return r, nil
}

// removesNoisyLabels is a loss that owns a noisyLabelRemoval.
type removesNoisyLabels interface {
	removal() noisyLabelRemoval
}

// removalOfLoss is l's noisy-label removal, off for a loss without one.
func removalOfLoss(l Loss) noisyLabelRemoval {
	if r, ok := l.(removesNoisyLabels); ok {
		return r.removal()
	}
	return noisyLabelRemoval{}
}

// checkRemovalOwner refuses a run that asks for noisy-label removal
// (update_interval above 0) with a loss that cannot do it: the other
// losses leave their peers' parameters unread, but removal changes what is
// learned from every label, and ignoring a request for it would pass off a
// plain run as a noise-robust one.
func checkRemovalOwner(l Loss, cfg TrainConfig) error {
	if _, ok := l.(removesNoisyLabels); ok {
		return nil
	}
	raw, given := cfg.LossParams["update_interval"]
	if !given {
		return nil
	}
	p := removalParams()[1]
	v, err := p.Convert(raw)
	if err != nil {
		return fmt.Errorf("update_interval: %w", err)
	}
	if v.(int64) == 0 {
		return nil
	}
	if l.Soft() {
		return fmt.Errorf("noisy-label removal applies to hard labels, not to the soft targets of loss %s", cfg.Loss)
	}
	return fmt.Errorf("noisy-label removal needs the token head and a loss of it on hard labels (%s or %s), not loss %s", LossCE, LossGCE, cfg.Loss)
}

// noiseWeights are the 0/1 loss weights of noisy-label removal (RoSTER,
// Meng et al. 2021, section 3.2), one pair per training token. Disabled,
// every weight is 1.
type noiseWeights struct {
	w []tokenWeights // per example; nil when disabled
}

func newNoiseWeights(exs []example, enabled bool) *noiseWeights {
	n := &noiseWeights{}
	if !enabled {
		return n
	}
	n.w = make([]tokenWeights, len(exs))
	for i := range exs {
		n.w[i] = tokenWeights{entity: ones(exs[i].len()), typ: ones(exs[i].len())}
	}
	return n
}

func ones(n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = 1
	}
	return out
}

// of returns the weights per example, nil when disabled.
func (n *noiseWeights) of() []tokenWeights { return n.w }

// removed counts the tokens whose entity and type weights are 0.
func (n *noiseWeights) removed() (entity, typ int) {
	for _, w := range n.w {
		for t := range w.entity {
			if w.entity[t] == 0 {
				entity++
			}
			if w.typ[t] == 0 {
				typ++
			}
		}
	}
	return entity, typ
}

// pack flattens the weights to bytes for a checkpoint.
func (n *noiseWeights) pack() (entity, typ []byte) {
	for _, w := range n.w {
		for t := range w.entity {
			entity = append(entity, byte(w.entity[t]))
			typ = append(typ, byte(w.typ[t]))
		}
	}
	return entity, typ
}

// unpack restores what pack returned.
func (n *noiseWeights) unpack(entity, typ []byte) error {
	total := 0
	for _, w := range n.w {
		total += len(w.entity)
	}
	if len(entity) != total || len(typ) != total {
		return fmt.Errorf("noisy-label weights for %d and %d tokens, the training set has %d", len(entity), len(typ), total)
	}
	i := 0
	for _, w := range n.w {
		for t := range w.entity {
			w.entity[t], w.typ[t] = float32(entity[i]), float32(typ[i])
			i++
		}
	}
	return nil
}

// removeNoisyLabels recomputes the weights from the current model, as
// RoSTER does every update_interval batches:
//
//   - the type loss of an entity token is switched off when the model gives
//     its distant type a probability (softmax over the types) of tau or less;
//   - the entity-vs-O loss of an O token is switched off when the model
//     gives O a probability of tau or less (entity tokens always count:
//     distant labels miss entities far more often than they invent them);
//   - a tag whose tokens would lose more than 90% of their type losses keeps
//     them all, so that no type disappears from training.
func (t *Trainer) removeNoisyLabels(exs []example, weights *noiseWeights) error {
	m := t.model
	types := m.numTypes()
	r := newRemoval(float32(t.removal.tau), types)
	// A prediction over the whole training set.
	err := m.inference(exs, lengthBatches(exs, 64), func(g *kit.Graph, b *Batch, h *ts.Tensor) {
		pTypes, pEntity := m.tokenScores(g, h)
		for i, id := range b.ids {
			r.judge(weights.w[id], exs[id].targets,
				func(tok, class int) float32 { return pTypes[b.pos(i, tok)*types+class] },
				func(tok int) float32 { return pEntity[b.pos(i, tok)] })
		}
	})
	if err != nil {
		return err
	}
	for _, c := range r.spare(exs, weights) {
		t.log.Info("noisy-label removal spares a tag", "tag", m.Labels.Tags[c+1], "would_remove", r.removed[c], "of", r.tokens[c])
	}
	entity, typ := weights.removed()
	t.log.Debug("noisy-label removal", "entity_removed", entity, "type_removed", typ)
	return nil
}

// removal is one pass of noisy-label removal: it judges tokens and counts,
// per entity tag, the tokens and those whose type loss it switched off.
type removal struct {
	tau             float32
	tokens, removed []int // per entity tag (class - 1)
}

func newRemoval(tau float32, types int) *removal {
	return &removal{tau: tau, tokens: make([]int, types), removed: make([]int, types)}
}

// judge sets the weights of one example from the model's probabilities:
// pType(t, c), the probability of entity tag c+1 among the entity tags at
// token t, and pEntity(t), the probability that token t is an entity.
func (r *removal) judge(w tokenWeights, targets []int32, pType func(t, c int) float32, pEntity func(t int) float32) {
	for t, y := range targets {
		w.entity[t], w.typ[t] = 1, 1
		switch {
		case y == 0:
			if 1-pEntity(t) <= r.tau {
				w.entity[t] = 0
			}
		case y > 0:
			r.tokens[y-1]++
			if pType(t, int(y-1)) <= r.tau {
				w.typ[t] = 0
				r.removed[y-1]++
			}
		}
	}
}

// spare switches the type loss back on for every token of a tag whose
// tokens lost more than 90% of it, and returns those tags (class - 1).
func (r *removal) spare(exs []example, weights *noiseWeights) []int {
	var spared []int
	for c := range r.tokens {
		if r.tokens[c] == 0 || float64(r.removed[c]) <= 0.9*float64(r.tokens[c]) {
			continue
		}
		spared = append(spared, c)
		for id := range exs {
			for t, y := range exs[id].targets {
				if int(y) == c+1 {
					weights.w[id].typ[t] = 1
				}
			}
		}
	}
	return spared
}

// tokenScores returns the token head's type distributions ([n*(K-1)],
// softmax over the entity tags) and entity probabilities ([n]).
func (m *Tagger) tokenScores(g *kit.Graph, h *ts.Tensor) (pTypes, pEntity []float32) {
	typ, entity := m.head.(TokenOutputs).Outputs(g, h)
	pTypes = kit.Float32s(g.T(typ.Softmax(1, gotch.Float, false)))
	pe := kit.Float32s(g.T(entity.Softmax(1, gotch.Float, false)))
	pEntity = make([]float32, len(pe)/2)
	for i := range pEntity {
		pEntity[i] = pe[2*i+1]
	}
	return pTypes, pEntity
}
