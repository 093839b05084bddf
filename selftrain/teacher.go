package selftrain

import (
	"context"
	"fmt"

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
}

// Selection counts the tokens a teacher labeled and those it kept.
type Selection struct {
	Tokens int `json:"tokens"`
	Kept   int `json:"kept"`
	// Entities are the kept tokens whose most probable tag is not O.
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
	Run    tagger.TrainConfig `json:"run"`
	Period int                `json:"period"`
	Pseudo Pseudo             `json:"pseudo"`
}

// DefaultTeacherConfig is BOND's CoNLL-2003 setting mapped to the BiLSTM's
// batches of 32: soft labels kept above 0.9, a new teacher every 225 steps
// (BOND: 450 steps of 16 sentences), at most 4 epochs scored on the dev set
// at each new teacher, stopped after 3 scores without a better F1 (on
// CoNLL-2003 the student peaked within its first epoch and declined after).
func DefaultTeacherConfig() TeacherConfig {
	run := tagger.DefaultTrainConfig()
	run.Loss, run.Epochs, run.EvalEvery, run.Patience = tagger.LossKL, 4, 225, 3
	return TeacherConfig{Run: run, Period: 225, Pseudo: Pseudo{Labels: LabelsSoft, Threshold: 0.9}}
}

// StudentResult is a teacher-student run: the trainer's result and what
// each teacher kept, the first (m as given) and every replacement.
type StudentResult struct {
	*tagger.Result
	Teachers []Selection `json:"teachers"`
}

// TrainStudent is BOND's teacher-student self-training of m, a token-head
// tagger (BOND's first-stage model), on the sentences of c (their tags are
// not used), with dev, if not nil, for model selection as in Trainer.Run.
// The teacher is a copy of the model: its pseudo-labels of c
// (PseudoLabels) are the student's targets, fitted with loss kl (the
// one-hot targets of hard labels make it cross entropy); the student
// starts from the teacher's weights and, every cfg.Period steps, becomes
// the next teacher. A frozen teacher without dropout gives the same
// pseudo-labels however often it is asked, so the copy is its predictions
// of the corpus, made once per teacher.
func TrainStudent(ctx context.Context, m *tagger.Tagger, c, dev *corpus.Corpus, cfg TeacherConfig, opts ...tagger.TrainerOption) (*StudentResult, error) {
	res := &StudentResult{}
	targets := func(probs [][][]float32) ([][][]float32, error) {
		soft, sel, err := PseudoLabels(probs, cfg.Pseudo)
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
