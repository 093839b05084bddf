package selftrain

import (
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/train/tagger"
)

// StageTeacher is the name of BOND's teacher-student self-training stage.
const StageTeacher = "selftrain.teacher"

func init() {
	d := DefaultTeacherConfig()
	params := []stages.Param{
		stages.IntParam("epochs", d.Run.Epochs, "self-training epochs", stages.Range(1, 1000)),
		stages.IntParam("period", d.Period, "steps between two teachers: the student becomes the teacher and labels the corpus again (-1: auto, half an epoch and at least 25 steps)", stages.AtLeast(PeriodAuto)),
		stages.StringParam("labels", d.Pseudo.Labels, "pseudo-labels: hard (the teacher's most probable tag; a CRF's Viterbi path) or soft (a token head's distribution squared and divided by the tags' frequencies; for a CRF, the fewest tags whose marginals add up to threshold)", stages.OneOf(LabelsHard, LabelsSoft)),
		stages.FloatParam("threshold", d.Pseudo.Threshold, "confidence (largest probability of the pseudo-label's distribution; a CRF's marginal of its Viterbi tag) under which a token is left out of the student's loss (a CRF student: left free); with a CRF and soft labels, the mass of each token's set of tags", stages.Range(0, 1)),
		// Named as loss partial's parameter, which it mirrors, so that a
		// method fanning its first step out over miss_rate pairs each copy
		// with the self-training of that copy's teacher (method bond).
		stages.FloatParam("miss_rate", d.Pseudo.OMissRate, "a CRF teacher: the chance that a token it is confidently O on is an entity, the weight of its entity tags (hard: its O at or above threshold; soft: its set {O}), as loss partial weighs a distant O (0: a hard O, the entity tags ruled out; 1: the token left free); not with a token head (until version 2: o_miss_rate)", stages.Range(0, 1)),
		stages.IntParam("eval_every", d.Run.EvalEvery, "score on the dev set every this many steps too, not only after each epoch, keeping the best step's weights (0: per epoch; -1: auto, at each new teacher)", stages.AtLeast(tagger.EvalAuto)),
	}
	params = append(params, runParams(d.Run)...)
	stages.Register(stages.Stage{
		Name:    StageTeacher,
		Version: 2,
		Doc: "BOND's second stage: teacher-student self-training of a tagger (BOND's first-stage model), token head or CRF. " +
			"The teacher, a copy of the model, labels the training corpus with pseudo-labels (hard or soft), keeping " +
			"the tokens where it is confident; the student, starting from the teacher's weights, fits them and becomes " +
			"the teacher every period steps. A token head fits them with KL divergence; a CRF with the partial-label " +
			"likelihood of the tags the teacher allows each token (one where it is confident, every tag where it is not; " +
			"with miss_rate, a confident O keeps the entity tags at that weight, a weak O as loss partial's distant O).",
		Params:    params,
		Inputs:    inputPorts("the first teacher (token head or CRF), e.g. train.tagger's model stopped early on the distant labels"),
		Outputs:   outputPorts("report.json: per-epoch loss, dev F1 at each evaluation, what each teacher kept"),
		Resumable: true,
		Run:       runTeacher,
	})
}

func teacherConfigOf(p stages.Params) TeacherConfig {
	cfg := DefaultTeacherConfig()
	cfg.Run.Epochs, cfg.Run.EvalEvery, cfg.Period = p.Int("epochs"), p.Int("eval_every"), p.Int("period")
	cfg.Pseudo = Pseudo{Labels: p.String("labels"), Threshold: p.Float("threshold"), OMissRate: p.Float("miss_rate")}
	readRun(p, &cfg.Run)
	return cfg
}

func runTeacher(c *stages.Context) error {
	cfg := teacherConfigOf(c.Params)
	return runSelfTraining(c, func(r *round) (any, error) {
		res, err := TrainStudent(c, r.model, r.text, r.dev, cfg, r.opts...)
		if err != nil {
			return nil, c.Failed(err)
		}
		c.Log.Info("teacher-student", "period", res.Period, "eval_every", res.EvalEvery, "max_epochs", res.MaxEpochs)
		for i, s := range res.Teachers {
			c.Log.Info("teacher", "n", i+1, "tokens", s.Tokens, "kept", s.Kept, "entities", s.Entities)
		}
		return map[string]any{"teacher_student": cfg, "types": r.model.Labels.Types, "result": res}, nil
	})
}
