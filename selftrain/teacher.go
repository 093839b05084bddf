package selftrain

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/train/tagger"
)

// Pseudo-labels of BOND's teacher (Pseudo.Labels).
const (
	// LabelsHard are the teacher's most probable tags, one-hot.
	LabelsHard = "hard"
	// LabelsSoft are the teacher's distributions squared and divided by
	// the tags' frequencies, renormalized (BOND's soft labels).
	LabelsSoft = "soft"
)

// Pseudo says how PseudoLabels makes a teacher's pseudo-labels.
type Pseudo struct {
	// Labels is LabelsHard or LabelsSoft.
	Labels string `json:"labels"`
	// Threshold is the confidence under which a token is left out of the
	// student's loss.
	Threshold float64 `json:"threshold"`
	// OMissRate is, for a CRF student (CRFPseudoLabels), the weight of the
	// entity tags of a token the teacher is confidently O on, as loss
	// partial weighs a distant O by its miss_rate: 0 makes the teacher's O
	// hard, ruling the entity tags out.
	OMissRate float64 `json:"miss_rate,omitempty"`
}

// Selection counts the tokens a teacher labeled and those it kept.
type Selection struct {
	Tokens int `json:"tokens"`
	// Kept are the tokens in the student's loss: for a CRF, those whose
	// row rules out or weakens at least one tag (a weak O, whose entity
	// tags keep weight miss_rate < 1, counts; one at miss_rate 1 says
	// nothing and is left free).
	Kept int `json:"kept"`
	// Entities are the kept tokens whose most probable tag is not O (for
	// a CRF, whose set of tags leaves O out).
	Entities int `json:"entities"`
}

// PseudoLabels turns a teacher's predictions of a corpus into a student's
// targets, BOND's high-confidence pseudo-labels. probs[i][t] is token t of
// sentence i's distribution r over the tag set [O, entity tags...] (the
// rows of Tagger.Predict); the targets use the layout of
// tagger.WithSoftTargets, a nil row for a token left out.
//
//   - hard: the one-hot of argmax_j r_j, kept where the teacher's
//     confidence max_j r_j is at least ps.Threshold.
//   - soft: s_j ∝ r_j^2 / f_j with f_j = sum of r_j over every token of the
//     corpus, renormalized per token (squaring sharpens a distribution,
//     dividing by the frequency keeps O, by far the most frequent tag, from
//     taking over), kept where max_j s_j is at least ps.Threshold (as BOND's
//     code selects soft labels).
func PseudoLabels(probs [][][]float32, ps Pseudo) ([][][]float32, Selection, error) {
	var sel Selection
	if ps.Threshold < 0 || ps.Threshold > 1 {
		return nil, sel, fmt.Errorf("confidence threshold %v, want [0, 1]", ps.Threshold)
	}
	if ps.Labels != LabelsHard && ps.Labels != LabelsSoft {
		return nil, sel, fmt.Errorf("pseudo-labels %q, want %s or %s", ps.Labels, LabelsHard, LabelsSoft)
	}
	k := -1
	var freq []float64 // f_j
	for i, s := range probs {
		for t, row := range s {
			if k < 0 {
				k, freq = len(row), make([]float64, len(row))
			}
			if len(row) != k || k < 2 {
				return nil, sel, fmt.Errorf("sentence %d, token %d: %d probabilities, want %d (O and at least one entity tag)", i+1, t+1, len(row), max(k, 2))
			}
			for j, x := range row {
				freq[j] += float64(x)
			}
		}
	}
	out := make([][][]float32, len(probs))
	for i, s := range probs {
		out[i] = make([][]float32, len(s))
		for t, row := range s {
			dist := make([]float64, k)
			for j, x := range row {
				dist[j] = float64(x)
			}
			if ps.Labels == LabelsSoft {
				dist = sharpen(dist, freq)
			}
			best := 0
			for j := range dist {
				if dist[j] > dist[best] {
					best = j
				}
			}
			sel.Tokens++
			// In the probabilities' precision: a teacher's 0.9 is kept at
			// threshold 0.9.
			if float32(dist[best]) < float32(ps.Threshold) || dist[best] == 0 {
				continue // nil: left out
			}
			sel.Kept++
			if best > 0 {
				sel.Entities++
			}
			target := make([]float32, k)
			if ps.Labels == LabelsHard {
				target[best] = 1
			} else {
				for j, x := range dist {
					target[j] = float32(x)
				}
			}
			out[i][t] = target
		}
	}
	return out, sel, nil
}

// sharpen is r_j^2 / f_j, renormalized (all 0 if nothing is left): BOND's
// soft label of a distribution r over the tags, and RoSTER's eq. 8 over the
// types, with f the frequencies over the corpus.
func sharpen(r, freq []float64) []float64 {
	out := make([]float64, len(r))
	total := 0.0
	for j, x := range r {
		if freq[j] > 0 {
			out[j] = x * x / freq[j]
			total += out[j]
		}
	}
	for j := range out {
		if total > 0 {
			out[j] /= total
		}
	}
	return out
}

// TeacherConfig is BOND's second stage: the trainer's settings (its loss
// is always kl), the steps between two teachers, and the pseudo-labels.
type TeacherConfig struct {
	Run tagger.TrainConfig `json:"run"`
	// Period is the number of steps between two teachers; PeriodAuto
	// derives it from the steps of an epoch (AutoPeriod).
	Period int    `json:"period"`
	Pseudo Pseudo `json:"pseudo"`
}

// PeriodAuto, as TeacherConfig.Period, makes a new teacher every
// AutoPeriod steps; Run.EvalEvery tagger.EvalAuto then scores the dev set
// at each new teacher.
const PeriodAuto = -1

// AutoPeriodsPerEpoch and AutoPeriodMinSteps make PeriodAuto's period:
// BOND replaces its teacher every 450 steps of 16 sentences on
// CoNLL-2003, about half an epoch (7,200 of 14,041 sentences); on a small
// corpus half an epoch is a few steps, and a student that has hardly
// moved from its teacher would relabel the corpus as it did, so a teacher
// lasts at least 25 steps.
const (
	AutoPeriodsPerEpoch = 2
	AutoPeriodMinSteps  = 25
)

// AutoPeriod is PeriodAuto's period for an epoch of stepsPerEpoch steps.
func AutoPeriod(stepsPerEpoch int) int {
	return tagger.AutoInterval(stepsPerEpoch, AutoPeriodsPerEpoch, AutoPeriodMinSteps)
}

// DefaultTeacherConfig is BOND's CoNLL-2003 setting mapped to the BiLSTM's
// batches of 32 and to the corpus's size: soft labels kept above 0.9, a
// new teacher every half epoch (BOND: 450 steps of 16 sentences; 220 steps
// on CoNLL-2003), at most 4 epochs scored on the dev set at each new
// teacher, stopped after 3 scores without a better F1 (on CoNLL-2003 the
// student peaked within its first epoch and declined after).
func DefaultTeacherConfig() TeacherConfig {
	run := tagger.DefaultTrainConfig()
	run.Loss, run.Epochs, run.EvalEvery, run.Patience = tagger.LossKL, 4, tagger.EvalAuto, 3
	return TeacherConfig{Run: run, Period: PeriodAuto, Pseudo: Pseudo{Labels: LabelsSoft, Threshold: 0.9}}
}

// withSteps resolves PeriodAuto, and Run.EvalEvery tagger.EvalAuto as the
// period, for an epoch of stepsPerEpoch steps.
func (cfg TeacherConfig) withSteps(stepsPerEpoch int) TeacherConfig {
	if cfg.Period == PeriodAuto {
		cfg.Period = AutoPeriod(stepsPerEpoch)
	}
	if cfg.Run.EvalEvery == tagger.EvalAuto {
		cfg.Run.EvalEvery = cfg.Period
	}
	return cfg
}

// CRFPseudoLabels turns a CRF teacher's predictions of a corpus into the
// sets of tags its student may give each token (loss tagger.LossTagSets,
// in the layout of tagger.WithSoftTargets: 1 for a tag in the set, a nil
// row for a token left free, and a weak O's entity tags at
// ps.OMissRate). tags is the teacher's tag set [O, entity
// tags...] (Labels.Tags), in the order of the predictions' Probs, the
// CRF's marginals p(y_t = j).
//
//   - hard: the Viterbi path's tag, where its marginal is at least
//     ps.Threshold (for a threshold above 0.5 that is the largest
//     marginal); every other token is left free.
//   - soft: the fewest tags, by decreasing marginal, whose marginals add up
//     to at least ps.Threshold: the teacher's credible set. A confident
//     token gets one tag, as under hard labels; an uncertain one keeps the
//     tags the teacher finds plausible and loses those it rules out (a
//     token that is PER or ORG but surely not O), instead of being left
//     free. Each set holds the teacher's tag with probability at least
//     ps.Threshold, the guarantee a kept hard label gives.
//
// A token whose kept set is O alone (hard: the Viterbi tag O at or above
// the threshold; soft: the credible set {O}) gets the row O = 1, every
// entity tag = ps.OMissRate: the teacher's O is evidence of the strength
// stage 1's partial loss gives a distant O, not a hard O. A hard O on
// every token the teacher is sure of teaches the student the teacher's
// misses; a weak one lets the student tag an entity where its own evidence
// outweighs the odds 1 : OMissRate. OMissRate 0 is the hard O. Entity
// sets, and sets that hold O with an entity tag, stay as they are: the
// teacher's entities are not what loses recall.
//
// BOND's soft labels, the marginals squared and divided by the tags'
// frequencies, are not used with a CRF: a token classifier fits them with
// KL, but the CRF learns paths, and a likelihood weighted by per-token
// soft evidence is maximized by its single best-weighted path, so it
// would be hard labels without the threshold's guarantee. What a CRF can
// learn from a distribution over tags is which tags it rules out, and
// how strongly a tag's evidence counts (the weak O).
func CRFPseudoLabels(preds []tagger.Prediction, tags []string, ps Pseudo) ([][][]float32, Selection, error) {
	var sel Selection
	if ps.Threshold < 0 || ps.Threshold > 1 {
		return nil, sel, fmt.Errorf("confidence threshold %v, want [0, 1]", ps.Threshold)
	}
	if ps.Labels != LabelsHard && ps.Labels != LabelsSoft {
		return nil, sel, fmt.Errorf("pseudo-labels %q, want %s or %s", ps.Labels, LabelsHard, LabelsSoft)
	}
	if ps.OMissRate < 0 || ps.OMissRate > 1 {
		return nil, sel, fmt.Errorf("miss_rate %v, want [0, 1]", ps.OMissRate)
	}
	k := len(tags)
	if k < 2 {
		return nil, sel, fmt.Errorf("tag set %v, want O and at least one entity tag", tags)
	}
	index := make(map[string]int, k)
	for j, tag := range tags {
		index[tag] = j
	}
	// In the marginals' precision: a teacher's 0.9 is kept at threshold 0.9.
	threshold := float32(ps.Threshold)
	out := make([][][]float32, len(preds))
	order := make([]int, k)
	for i, p := range preds {
		if len(p.Tags) != len(p.Probs) {
			return nil, sel, fmt.Errorf("sentence %d: %d tags and %d distributions", i+1, len(p.Tags), len(p.Probs))
		}
		out[i] = make([][]float32, len(p.Probs))
		for t, row := range p.Probs {
			if len(row) != k {
				return nil, sel, fmt.Errorf("sentence %d, token %d: %d probabilities for the %d tags %v", i+1, t+1, len(row), k, tags)
			}
			sel.Tokens++
			set := make([]float32, k)
			size := 0
			switch ps.Labels {
			case LabelsHard:
				v, ok := index[p.Tags[t]]
				if !ok {
					return nil, sel, fmt.Errorf("sentence %d, token %d: tag %q is not in the tag set %v", i+1, t+1, p.Tags[t], tags)
				}
				if row[v] >= threshold && row[v] > 0 {
					set[v], size = 1, 1
				}
			case LabelsSoft:
				for j := range order {
					order[j] = j
				}
				// Stable: equal marginals enter in tag order.
				slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(row[b], row[a]) })
				mass := float32(0)
				for _, j := range order {
					set[j], mass = 1, mass+row[j]
					size++
					if mass >= threshold {
						break
					}
				}
			}
			if size == 1 && set[0] == 1 && ps.OMissRate > 0 {
				if ps.OMissRate >= 1 {
					continue // an O that says nothing: free
				}
				for j := 1; j < k; j++ {
					set[j] = float32(ps.OMissRate)
				}
			}
			if size == 0 || size == k {
				continue // free: nil
			}
			sel.Kept++
			if set[0] == 0 {
				sel.Entities++
			}
			out[i][t] = set
		}
	}
	return out, sel, nil
}

// StudentResult is a teacher-student run: the trainer's result and what
// each teacher kept, the first (m as given) and every replacement.
type StudentResult struct {
	*tagger.Result
	// Period is the run's steps between two teachers (PeriodAuto
	// resolved).
	Period   int         `json:"period"`
	Teachers []Selection `json:"teachers"`
}

// TrainStudent is BOND's teacher-student self-training of m (BOND's
// first-stage model) on the sentences of c (their tags are not used), with
// dev, if not nil, for model selection as in Trainer.Run. The teacher is a
// copy of the model: its pseudo-labels of c are the student's targets;
// the student starts from the teacher's weights and, every cfg.Period
// steps, becomes the next teacher. A frozen teacher without dropout gives
// the same pseudo-labels however often it is asked, so the copy is its
// predictions of the corpus, made once per teacher.
//
// A token-head m learns PseudoLabels with loss kl (the one-hot targets of
// hard labels make it cross entropy); a CRF m learns CRFPseudoLabels with
// the partial-label likelihood of loss tag_sets. cfg.Run.Loss is set here;
// PeriodAuto and an automatic Run.EvalEvery are resolved on c's steps an
// epoch.
func TrainStudent(ctx context.Context, m *tagger.Tagger, c, dev *corpus.Corpus, cfg TeacherConfig, opts ...tagger.TrainerOption) (*StudentResult, error) {
	if cfg.Run.BatchSize < 1 {
		return nil, fmt.Errorf("batch size %d", cfg.Run.BatchSize)
	}
	cfg = cfg.withSteps(tagger.StepsPerEpoch(c, cfg.Run.BatchSize))
	res := &StudentResult{Period: cfg.Period}
	var label func(preds []tagger.Prediction) ([][][]float32, Selection, error)
	switch m.Config.Head {
	case tagger.TokenHead:
		if cfg.Pseudo.OMissRate != 0 {
			// KL fits a distribution: there is no evidence weight to give.
			return nil, fmt.Errorf("miss_rate %v: a weak O is for a %s teacher's pseudo-labels, not the %s head's", cfg.Pseudo.OMissRate, tagger.CRFHead, tagger.TokenHead)
		}
		cfg.Run.Loss = tagger.LossKL
		label = func(preds []tagger.Prediction) ([][][]float32, Selection, error) {
			return PseudoLabels(probsOf(preds), cfg.Pseudo)
		}
	case tagger.CRFHead:
		cfg.Run.Loss = tagger.LossTagSets
		tags := m.Labels.Tags
		label = func(preds []tagger.Prediction) ([][][]float32, Selection, error) {
			return CRFPseudoLabels(preds, tags, cfg.Pseudo)
		}
	default:
		return nil, fmt.Errorf("teacher-student self-training needs a tagger with the %s or %s head, not %s", tagger.TokenHead, tagger.CRFHead, m.Config.Head)
	}
	targets := func(preds []tagger.Prediction) ([][][]float32, error) {
		soft, sel, err := label(preds)
		if err == nil {
			res.Teachers = append(res.Teachers, sel)
		}
		return soft, err
	}
	r, err := selfTrain(ctx, m, c, dev, cfg.Run, cfg.Period, targets, opts...)
	if err != nil {
		return nil, err
	}
	res.Result = r
	return res, nil
}
