package methods

import (
	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/selftrain"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/train/tagger"
)

// Bond is BOND (Liang et al., KDD 2020) on distant labels: a tagger
// trained on them and stopped early, before it fits their noise, then
// teacher-student self-training from it. Both models are scored on the
// dev set given; the final one on the test set too.
//
//	[label] -> early (train.tagger, eval_every, patience) -> selftrain (selftrain.teacher) -> select -> overlay -> register
//	vectors --^        \-> eval-early ---------------------------\-> eval-selftrain -^   \-> eval-select \-> test
//	select -> overlay-fill, overlay-override (the gazetteer overlay, each with eval-) -> overlay (the best on dev)
//
// With several miss rates (partial=true; by default 0.5 and 0) early and
// selftrain are fanned out over miss_rate, one chain per rate, and select
// weighs all their models: labels whose O hides entities (CoNLL-2003's)
// want 0.5, a dictionary whose gaps untyped phrases cover (BC5CDR's) the
// sure O of 0, and the dev input tells which (docs/bond.md).
//
// selftrain=false registers the early-stopped model (the ablation of
// stage 2; the prefix and its cache are kept); labels=hard is BOND's
// hard pseudo-labels; select keeps stage 1's model where self-training
// lowered the dev F1. By default (partial=true) both models are
// partial-label CRFs, and partial=false is BOND's own recipe:
// stage 1 learns the distant labels as evidence (a match is kept, an
// unmatched token is O only with probability 1 - miss_rate), which cross
// entropy on labels of low recall cannot (it learns their misses as O),
// and stage 2's student learns the CRF teacher's confident tags with every
// other token left free (selftrain.CRFPseudoLabels). The teacher's
// confident O is weighed as stage 1 weighs a distant O (miss_rate =
// miss_rate): a hard O on every token the teacher is sure of would teach
// the student the teacher's misses, the recall stage 1's weak O kept.
func init() {
	d := selftrain.DefaultTeacherConfig()
	spec.RegisterMethod(spec.Method{
		Name: "bond",
		Doc: "BOND: a tagger trained on distant labels (given, or made from gazetteers), scored on the dev set " +
			"every eval_every steps and stopped early at the best step; then teacher-student self-training: the " +
			"teacher, a copy of that model, labels the training corpus with high-confidence pseudo-labels (soft or " +
			"hard), the student fits them and replaces the teacher every period steps. By default (partial=true) both " +
			"are partial-label CRFs: stage 1 trained with loss partial (an unmatched token may be an entity, with " +
			"probability miss_rate), stage 2's student restricted to the teacher's confident tags, its confident O as weak as a distant O (miss_rate), " +
			"every other token free; each miss_rate listed (by default 0.5 and 0) trains both stages; partial=false is BOND's token classifier with cross entropy. Each model scored on the dev set, the " +
			"best on dev kept (select), scored on the test set and registered under the spec's name." + overlayDoc,
		Params: append([]stages.Param{
			stages.IntParam("seed", 1, "seed of the initial weights, batches and dropout", stages.AtLeast(0)),
			tagger.SchemeParam("io", "tag scheme of the labels and the tagger"),
			stages.IntParam("epochs", 8, "stage 1: at most this many epochs on the distant labels, the step chosen on the dev set and patience stopping it (BOND: 900 steps of 16 sentences with RoBERTa; a BiLSTM learns slower: at 3, BC5CDR's dev F1 was still rising at the last step), raised to reach min_steps", stages.Range(1, 1000)),
			minStepsParam("stage 1:"),
			wordDropoutParam("stage 1 (stage 2 keeps its rate)", 0),
			stages.IntParam("eval_every", tagger.EvalAuto, "stage 1: steps between two scores on the dev set, the best step's model kept (0: per epoch; -1: auto, an eighth of an epoch and at least 50 steps: 55 on CoNLL-2003)", stages.AtLeast(tagger.EvalAuto)),
			stages.IntParam("patience", 4, "stage 1: stop after this many scores without a better dev F1 (0: run every epoch)", stages.AtLeast(0)),
			stages.FloatParam("drop_o", 0, "stage 1: fraction of the distant O tokens left out of the loss (BOND: none; not with partial)", stages.Range(0, 0.99)),
			stages.BoolParam("partial", true, "both stages partial-label CRFs: stage 1 with loss "+tagger.LossPartial+" (a distant O is evidence of strength 1 - miss_rate, a match is kept), stage 2's student with loss "+tagger.LossTagSets+" (the teacher's tag where it is confident, any tag elsewhere; soft labels: the fewest tags holding threshold of its marginals; the teacher's confident O weighs the entity tags by miss_rate, as stage 1's distant O) (false: BOND's recipe, token classifiers with cross entropy, then KL; on the shipped sample its stage 1 scores dev F1 42-53 against the labels' 65, the partial CRF 69-71)"),
			stages.FloatListParam("miss_rate", []float64{0.5, 0}, "with partial: the chance that a distant O hides an entity token (1 − the labels' recall; 0: an unmatched token is O, AutoNER's setting, for labels whose gaps untyped phrases cover); several: candidates, both stages trained at each (stage 2's student weighing its teacher's confident O alike), the dev input keeping the best model of them all (node select); without a dev input the first", stages.Range(0, 1)),
			tagger.Param("type_miss_rates"),
			tagger.Param("mistype_rates"),
			stages.BoolParam("select", true, "the final model is the one of the two stages (at each candidate miss_rate) that scores best on the dev input (node select; stage 2 wins a tie): self-training that lowers the dev F1 does not replace its teacher (false: stage 2's model; without a dev input, always stage 2's)"),
			stages.BoolParam("selftrain", true, "stage 2, teacher-student self-training (false: register the early-stopped model; ablation)"),
			stages.StringParam("labels", d.Pseudo.Labels, "stage 2 pseudo-labels: soft (BOND's best) or hard", stages.OneOf(selftrain.LabelsSoft, selftrain.LabelsHard)),
			stages.FloatParam("threshold", d.Pseudo.Threshold, "stage 2: confidence under which a token is left out of the student's loss (0: keep all)", stages.Range(0, 1)),
			stages.IntParam("period", d.Period, "stage 2: steps between two teachers (BOND: 450 steps of 16 sentences, half an epoch of CoNLL-2003) (-1: auto, half an epoch and at least 25 steps)", stages.AtLeast(selftrain.PeriodAuto)),
			stages.IntParam("selftrain_epochs", d.Run.Epochs, "stage 2: self-training epochs", stages.Range(1, 1000)),
			stages.IntParam("selftrain_eval_every", d.Run.EvalEvery, "stage 2: steps between two scores on the dev set (0: per epoch; -1: auto, at each new teacher)", stages.AtLeast(tagger.EvalAuto)),
			stages.IntParam("selftrain_patience", d.Run.Patience, "stage 2: stop after this many scores without a better dev F1 (0: never)", stages.AtLeast(0)),
		}, append(append(fileParams(), distantParams(refineAuto, capitalizedAuto)...), encoderParams()...)...),
		Inputs: append(distantInputs(), encoderInput()),
		Build:  buildBond,
	})
}

func buildBond(b *spec.Builder) error {
	checkFiles(b)
	checkEncoder(b)
	p := b.Params()
	corpus := trainingCorpus(b)
	// Stage 1: the distant labels, stopped early; stage 2 follows the
	// head of its model.
	early := b.Node("early", tagger.StageTrain).Queue("gpu").
		Pass("seed", "scheme", "epochs", "min_steps", "word_dropout", "eval_every", "patience").
		Input("embeddings", vectors(b))
	withEncoder(b, early)
	var rates []float64
	var byRate fanout // stage 1's fan-out over the miss rates, nil for one
	var copies []string
	if p.Bool("partial") {
		partialOnLabels(early)
		if b.IsSet("drop_o") {
			b.Errorf("params.drop_o", "applies to cross entropy on the labels, which partial=true replaces with the partial-label CRF (miss_rate weighs a distant O instead)")
		}
		if rates = candidateMissRates(b); len(rates) == 0 {
			return nil
		}
		// Replaces the list partialOnLabels passed.
		byRate, copies = missRateFan(early, rates)
	} else {
		early.Set("head", tagger.TokenHead).Set("loss", tagger.LossCE).Pass("drop_o")
		if b.IsSet("miss_rate") {
			b.Errorf("params.miss_rate", "applies to the partial-label CRF of partial=true")
		}
		refuseLabelNoise(b, "applies to the partial-label CRF of partial=true")
	}
	corpus(early)
	readSplit(b, early, "dev", "dev")
	scoreDev(b, early, byRate)
	last := finalModel{step: early, name: b.Name()}
	cands := []candidate{{step: early, fan: byRate, copies: copies, name: "early-stopped"}}

	// Stage 2: teacher-student self-training, one per stage-1 model.
	if p.Bool("selftrain") {
		st := b.Node("selftrain", selftrain.StageTeacher).Queue("gpu").Input("model", early.Out("model")).
			Pass("seed", "labels", "threshold", "period").
			PassAs("epochs", "selftrain_epochs").PassAs("eval_every", "selftrain_eval_every").PassAs("patience", "selftrain_patience")
		if p.Bool("partial") {
			// The teacher's O is as weak as the distant O its stage 1
			// learned from: the fan-out over miss_rate pairs each copy with
			// its teacher and sets the stage's own miss_rate.
			missRateFan(st, rates)
		}
		selfTraining(b, st, corpus, byRate)
		last = finalModel{step: st, name: b.Name()}
		cands = append(cands, candidate{step: st, fan: byRate, copies: copies, name: "self-trained"})
	}
	switch {
	case len(rates) > 1 && !p.Bool("select"):
		b.Errorf("params.select", "false keeps the last step's model, but miss_rate lists %d candidates, of which select keeps one on dev", len(rates))
	case p.Bool("select") && (len(cands) > 1 || len(copies) > 1):
		if best := bestOnDev(b, cands...); best != nil {
			last = *best
		}
	}
	finish(b, last)
	return nil
}
