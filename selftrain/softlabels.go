package selftrain

import (
	"fmt"
	"slices"
	"strings"
)

// Entity-vs-O targets of self-training (Targets.Entity).
const (
	// EntityHard fits the model's decision, p(entity) >= 0.5, as a hard
	// label.
	EntityHard = "hard"
	// EntityModel fits the model's p(entity) at the last computation of
	// the targets: between two computations it keeps the entity-vs-O head
	// near that model (dropout is the only noise), and lets the types
	// self-train.
	EntityModel = "model"
	// EntityEnsemble fits, on every token, the p(entity) of the averaged
	// predictions of the seeds (Targets.Ensemble), the same all through
	// self-training. It is what RoSTER's released code does (its binary
	// head's target is the ensemble's soft label, while the types follow
	// the model), where its paper says only "binary cross entropy": the
	// entity-vs-O decision stays the ensemble's, in which the seeds' own
	// mistakes partly cancel, and cannot drift towards the model's.
	EntityEnsemble = "ensemble"
	// EntitySharpen fits the model's [p(O), p(entity)] sharpened as the
	// types are (squared, divided by the frequency over the corpus,
	// renormalized), as BOND does over all tags. O is the frequent class,
	// so a token the model gives a fair p(entity) (about 0.3 when a sixth of
	// the tokens are entities) becomes an entity target: recall grows
	// round after round, where the other targets keep the entity decisions
	// where they are. Not in RoSTER: tried because RoSTER's targets left
	// the distilled BiLSTM's recall unchanged. It helps where recall is the
	// weak point (the shipped sample: 53.0 -> 67.4 dev F1) and hurts where
	// precision and recall are even (CoNLL-2003: 73.0 -> 70.9): let the dev
	// set decide (docs/roster.md).
	EntitySharpen = "sharpen"
)

// EntityTargets are the values of Targets.Entity.
var EntityTargets = []string{EntityHard, EntityModel, EntityEnsemble, EntitySharpen}

// Targets says how SoftLabels makes the targets.
type Targets struct {
	// Threshold is the p(entity) under which a token's types are left out.
	Threshold float64
	// Entity is one of EntityTargets.
	Entity string
	// Ensemble are the averaged predictions (in the layout of probs) whose
	// p(O) EntityEnsemble fits; unused otherwise.
	Ensemble [][][]float32
}

// SoftLabels turns a token-head tagger's predictions of a corpus into
// self-training targets. probs[i][t] is token t of sentence i's
// distribution over the tag set, [p(O), p(entity) * p(type 1), ...] (the
// rows of Tagger.Predict). The targets use the layout of
// tagger.WithSoftTargets: a target p(O), then weights over the entity tags.
//
//   - Entity vs O (fitted with binary cross entropy): with EntityHard the
//     model's decision, p(O) = 0 where p(entity) >= 0.5 and 1 elsewhere;
//     with EntityModel the model's own p(O); with EntityEnsemble the p(O)
//     of tg.Ensemble; with EntitySharpen the model's [p(O), p(entity)]
//     sharpened by the same rule as the types, over every token.
//   - Types: with f_ij = p(type j | entity) of token i, zeroed on the tokens
//     whose p(entity) is below tg.Threshold (their types are left out of the
//     loss), y_ij ∝ f_ij^2 / g_j with g_j = sum_i f_ij, the frequency of
//     type j over the corpus's confident tokens (RoSTER's eq. 8): squaring
//     sharpens each token's distribution and dividing by g_j keeps frequent
//     types from taking over.
func SoftLabels(probs [][][]float32, tg Targets) ([][][]float32, error) {
	threshold := tg.Threshold
	if threshold < 0 || threshold > 1 {
		return nil, fmt.Errorf("entity threshold %v, want [0, 1]", threshold)
	}
	if !slices.Contains(EntityTargets, tg.Entity) {
		return nil, fmt.Errorf("entity target %q, want one of %s", tg.Entity, strings.Join(EntityTargets, ", "))
	}
	if tg.Entity == EntityEnsemble {
		if err := alignedWith(tg.Ensemble, probs); err != nil {
			return nil, fmt.Errorf("entity target %s: %w", EntityEnsemble, err)
		}
	}
	k := 0
	for _, s := range probs {
		for _, row := range s {
			k = len(row)
			break
		}
		if k > 0 {
			break
		}
	}
	if k == 1 {
		return nil, fmt.Errorf("a tag set of O alone has no types to self-train")
	}
	// f holds the type distributions of the confident tokens (nil
	// elsewhere), g the types' frequencies.
	f := make([][][]float64, len(probs))
	g := make([]float64, max(k-1, 0))
	var gEntity []float64 // [sum p(O), sum p(entity)] over every token
	if tg.Entity == EntitySharpen {
		gEntity = make([]float64, 2)
	}
	for i, s := range probs {
		f[i] = make([][]float64, len(s))
		for t, row := range s {
			if len(row) != k {
				return nil, fmt.Errorf("sentence %d, token %d: %d probabilities, want %d", i+1, t+1, len(row), k)
			}
			entity := 1 - float64(row[0])
			if gEntity != nil {
				gEntity[0] += float64(row[0])
				gEntity[1] += entity
			}
			if entity < threshold || entity <= 0 {
				continue
			}
			f[i][t] = make([]float64, k-1)
			for j, x := range row[1:] {
				f[i][t][j] = float64(x) / entity
				g[j] += f[i][t][j]
			}
		}
	}
	out := make([][][]float32, len(probs))
	for i, s := range probs {
		out[i] = make([][]float32, len(s))
		for t, row := range s {
			target := make([]float32, k)
			switch {
			case tg.Entity == EntityModel:
				target[0] = row[0]
			case tg.Entity == EntityEnsemble:
				target[0] = tg.Ensemble[i][t][0]
			case tg.Entity == EntitySharpen:
				target[0] = float32(sharpen([]float64{float64(row[0]), 1 - float64(row[0])}, gEntity)[0])
			case 1-float64(row[0]) < 0.5:
				target[0] = 1
			}
			if ft := f[i][t]; ft != nil {
				for j, y := range sharpen(ft, g) {
					target[1+j] = float32(y)
				}
			}
			out[i][t] = target
		}
	}
	return out, nil
}

// alignedWith checks that the averaged predictions avg cover the corpus of
// probs: as many sentences, tokens and tags.
func alignedWith(avg, probs [][][]float32) error {
	if len(avg) != len(probs) {
		return fmt.Errorf("the averaged predictions have %d sentences, the corpus %d", len(avg), len(probs))
	}
	for i, s := range probs {
		if len(avg[i]) != len(s) {
			return fmt.Errorf("sentence %d: the averaged predictions have %d tokens, the corpus %d", i+1, len(avg[i]), len(s))
		}
		for t, row := range s {
			if len(avg[i][t]) != len(row) {
				return fmt.Errorf("sentence %d, token %d: the averaged predictions have %d tags, the model %d", i+1, t+1, len(avg[i][t]), len(row))
			}
		}
	}
	return nil
}
