package methods

import (
	"github.com/nerflow/nerflow/augment"
	"github.com/nerflow/nerflow/ensemble"
	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/selftrain"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/train/tagger"
)

// Roster is RoSTER (Meng et al., 2021) on distant labels: K noise-robust
// taggers, their ensemble distilled into one, then self-training. Every
// step is scored on the dev set given; the final model on the test set too.
//
//	[label] -> noise (K seeds [x rates]) [-> select-noise (K)] -> predict (K) -> average -> distil -> selftrain -> register
//	       |          \-> eval-noise (K [x rates])              /                \-> eval-distil \-> eval-selftrain, test
//	       |-> [span (span_seeds) -> predict-span] --/
//	       \-> lm (language models of the training text, [unlabeled]) ---------------/
//	eval-noise (K), eval-distil, eval-selftrain -> select (the best model on dev) -> eval-select
//	select -> overlay-fill, overlay-override (with the gazetteer overlay) -> eval-overlay-MODE
//	eval-select, eval-overlay-MODE -> overlay (the best of the three on dev) -> eval-overlay, test, register
//
// The default seeds are partial-label CRFs and the student a CRF on the
// ensemble's labels, without self-training: on the dev splits they beat
// RoSTER's own recipe by 3 to 15 F1 (docs/roster.md). Each seed trains
// at each candidate miss rate (0.5 and 0) and the dev input keeps the
// better per seed (select-noise): how often the labels leave an entity O
// is a property of the corpus, which dev measures and a default cannot.
// partial=false is the paper's recipe (GCE, noisy-label removal, a KL
// student, self-training with augmentation), whose ablations switch steps off and keep the prefix
// (and its cache): gce=false trains with cross entropy, removal=false keeps
// every label, ensemble=false self-trains the single seed's model,
// selftrain=false registers the distilled (or single) model, augment=false
// self-trains without augmented sentences (no node lm). The final model is
// the best of every step's models on the dev split (select=false: the last
// step's), because the student falls below its seeds on small corpora.
// teacher_student adds BOND's teacher-student rounds on the last step's
// model (node teacher-student, one more candidate of select): off by
// default, as they add F1 on CoNLL-2003 alone of the corpora measured.
// refine (auto by default) first cross-checks the distant labels with
// fold taggers and keeps them, or their refinement, as the dev split
// prefers (methods/refine.go): on labels of precision 49 the refined ones
// won every seed set, on labels of precision 81 the given ones did.
// span_seeds adds span classifiers with negative sampling to the ensemble
// beside the CRF seeds: off by default, as on CoNLL-2003 they add 0.3 to
// the final model at twice the time, and nothing on a small
// corpus.
func init() {
	d := selftrain.DefaultConfig()
	spec.RegisterMethod(spec.Method{
		Name: "roster",
		Doc: "RoSTER: K taggers of different seeds trained on distant labels (given, or made from gazetteers), their " +
			"averaged predictions distilled into one tagger; each step scored on the dev set, the final model on the " +
			"test set, registered under the spec's name. By default the seeds are partial-label CRFs (a match is kept, " +
			"an unmatched token may be an entity), each trained at every candidate miss rate with the dev input keeping " +
			"the better per seed, and the student a partial-label CRF on the ensemble's most probable tags. " +
			"partial=false is the paper's recipe: seeds trained with generalized cross entropy and noisy-label " +
			"removal, a student fitting the averaged distributions with KL, then self-trained on its sharpened " +
			"predictions and on contextual augmentations of the sentences, drawn every epoch from language models " +
			"trained on the training text (and the unlabeled input, if any). By default (refine=auto) the labels are first " +
			"cross-checked by taggers trained on folds that never saw the labeled strings, and refined where the dev split " +
			"prefers it." + overlayDoc,
		Params: append([]stages.Param{
			stages.IntListParam("seeds", []int{1, 2, 3, 4, 5}, "seeds of the noise-robust taggers (K = 5), trained in parallel on the gpu queue", stages.AtLeast(0)),
			stages.IntListParam("span_seeds", nil, "seeds of span classifiers trained with negative sampling (method negsample's loss, uniform sampling, with type_miss_rates and mistype_rates) on the same labels, which join the seeds in the ensemble (node span): models of another kind, whose errors differ from the CRFs' (empty: none)", stages.AtLeast(0)),
			stages.IntParam("span_epochs", 10, "span seeds: training epochs (method negsample's default), raised to reach min_steps; the dev split picks the best", stages.Range(1, 1000)),
			tagger.SchemeParam("io", "tag scheme of the labels and the taggers"),
			stages.IntParam("epochs", 3, "noise-robust training epochs of each seed, raised to reach min_steps", stages.Range(1, 1000)),
			minStepsParam("the seeds and the student each"),
			wordDropoutParam("the seeds, the span seeds and the student", wordDropout),
			stages.FloatParam("drop_o", 0.5, "fraction of the distant O tokens left out of the loss", stages.Range(0, 0.99)),
			stages.BoolParam("gce", true, "generalized cross entropy (false: cross entropy; ablation)"),
			stages.BoolParam("partial", true, "the seeds are partial-label CRFs (loss "+tagger.LossPartial+": a distant O is evidence of strength 1 - miss_rate, a match is kept) instead of token classifiers with generalized cross entropy and noisy-label removal (false: RoSTER's recipe)"),
			stages.FloatListParam("miss_rate", []float64{0.5, 0}, "partial: the chance that the distant labels left an entity token O (1 - their recall; 0: an unmatched token is O, AutoNER's setting, for labels whose gaps untyped phrases cover); several: candidates, each seed trained at each, the dev input keeping per seed the better (node select-noise), which joins the ensemble; without a dev input the first", stages.Range(0, 1)),
			tagger.Param("type_miss_rates"),
			tagger.Param("mistype_rates"),
			tagger.Param("q"),
			stages.BoolParam("removal", true, "noisy-label removal (false: every distant label counts; ablation)"),
			tagger.Param("tau"),
			stages.IntParam("update_interval", 200, "batches between noisy-label removals", stages.AtLeast(1)),
			stages.BoolParam("ensemble", true, "average the seeds' predictions and distil them into one tagger (false: one seed; ablation)"),
			stages.IntParam("distil_epochs", 2, "distillation epochs, raised to reach min_steps", stages.Range(1, 1000)),
			stages.FloatParam("student_miss_rate", 0.2, "crf student: the chance that the ensemble's labels left an entity token O. Lower than miss_rate: an ensemble's O is its seeds' confident decision, not a gazetteer's silence (a student at miss_rate lost 2.5-6 points of precision on BC5CDR and the samples, docs/roster.md)", stages.Range(0, 1)),
			stages.StringParam("student", studentAuto, "what the ensemble is distilled into: kl (RoSTER: a token classifier fitting the averaged distributions with KL), crf (a partial-label CRF trained on the ensemble's most probable tags, node ensemble-labels; then self-training, which fits a token classifier, is off) or auto (crf with partial seeds, kl otherwise)", stages.OneOf(studentAuto, studentKL, studentCRF)),
			stages.BoolParam("select", true, "the final model is the one of the seeds, the student and the self-trained model that scores best on the dev input (node select; a later step wins a tie), so that a student below its teachers on a small corpus does not replace them (false: the last step's model; without a dev input, always the last)"),
			stages.BoolParam("selftrain", true, "self-train the distilled model, with the kl student only: the crf student leaves it off unless set (false: stop after distillation; ablation)"),
			stages.IntParam("selftrain_epochs", d.Run.Epochs, "self-training epochs", stages.Range(1, 1000)),
			stages.IntParam("selftrain_update_interval", d.UpdateInterval, "steps between two computations of the self-training targets", stages.AtLeast(1)),
			stages.FloatParam("entity_threshold", d.Targets.Threshold, "self-training: p(entity) under which a token's types are left out", stages.Range(0, 1)),
			stages.StringParam("entity_target", selftrain.EntityEnsemble, "self-training's entity-vs-O target: ensemble (the averaged predictions' p(entity), fixed, as RoSTER's code; hard when ensemble=false leaves no average), hard (the model's decision), model (its p(entity)) or sharpen (the model's [p(O), p(entity)] squared and divided by their frequencies, as BOND)", stages.OneOf(selftrain.EntityTargets...)),
			stages.BoolParam("teacher_student", false, "after the last step (the student, or its self-training), BOND's teacher-student self-training of its model (stage "+selftrain.StageTeacher+", node teacher-student, at that stage's defaults but patience 0: soft pseudo-labels above confidence 0.9, a new teacher every half epoch, four epochs, the best step on dev kept; a crf student's confident O weighs the entity tags by student_miss_rate), scored on the dev set and one more candidate of select"),
			stages.BoolParam("augment", true, "self-training on contextual augmentations too, from language models trained on the gpu queue (false: originals only; ablation)"),
			stages.StringParam("augment_lm", augmentLSTM, "what the augmentation draws replacement words from: lstm (forward and backward LSTM language models trained on the training text and the unlabeled input, node lm) or encoder (the masked-LM head of the encoder input, top 5 of each masked word; with encoder_placement none the taggers do not read it)", stages.OneOf(augmentLSTM, augmentEncoder)),
		}, append(append(fileParams(), distantParams(refineAuto, capitalizedAuto)...), encoderParams(tagger.EncoderNone)...)...),
		Inputs: append(distantInputs(), stages.Port{Name: "unlabeled", Kind: "text", Many: true, Optional: true,
			Doc: "more text for the language models of the augmentation: Brown-corpus files (stage " + augment.StageLM + "'s defaults)"},
			encoderInput()),
		Build: buildRoster,
	})
}

// The sources of the augmentation's replacement words (param augment_lm).
const (
	augmentLSTM    = "lstm"
	augmentEncoder = "encoder"
)

// The students of the ensemble (param student).
const (
	studentAuto = "auto" // crf after partial-label seeds, kl otherwise
	studentKL   = "kl"
	studentCRF  = "crf"
)

func buildRoster(b *spec.Builder) error {
	checkFiles(b)
	checkEncoder(b)
	p := b.Params()
	seeds := p.Ints("seeds")
	student := p.String("student")
	if student == studentAuto {
		student = studentKL
		if p.Bool("partial") {
			student = studentCRF
		}
	}
	// Self-training fits a token classifier: on by default after the kl
	// student, off after the crf one unless asked for (then an error).
	selftrainOn := p.Bool("selftrain") && (student == studentKL || b.IsSet("selftrain"))
	switch {
	case len(seeds) == 0:
		b.Errorf("params.seeds", "want at least one seed")
	case !p.Bool("ensemble") && len(seeds) > 1:
		b.Errorf("params.seeds", "without the ensemble one tagger is trained: give one seed")
	}
	// RoSTER's self-training fits the ensemble's p(entity); without the
	// ensemble (an ablation, one flag) the default falls back to the
	// model's decisions, and only an explicit ensemble is an error.
	entityTarget := p.String("entity_target")
	if entityTarget == selftrain.EntityEnsemble && selftrainOn && !p.Bool("ensemble") {
		if b.IsSet("entity_target") {
			b.Errorf("params.entity_target", "%s fits the averaged predictions of the seeds, which ensemble=false leaves out", selftrain.EntityEnsemble)
		}
		entityTarget = selftrain.EntityHard
	}
	if student == studentCRF && selftrainOn {
		b.Errorf("params.student", "self-training fits a token classifier, and the crf student is one: set selftrain=false (training the CRF on the ensemble's labels is itself a round of self-training)")
	}
	if student == studentCRF && !p.Bool("ensemble") && b.IsSet("student") {
		b.Errorf("params.student", "the crf student learns the ensemble's labels, which ensemble=false leaves out")
	}
	augmentOn := p.Bool("augment") && selftrainOn
	fromEncoder := p.String("augment_lm") == augmentEncoder
	switch {
	case b.Has("unlabeled") && !augmentOn:
		b.Errorf("inputs.unlabeled", "the unlabeled text trains the language models of the augmentation, which augment=false or selftrain=false leave out")
	case b.Has("unlabeled") && fromEncoder:
		b.Errorf("inputs.unlabeled", "the unlabeled text trains the LSTM language models of the augmentation, which augment_lm=encoder replaces (pretrain the encoder on it instead)")
	}
	switch {
	case fromEncoder && !b.Has("encoder"):
		b.Errorf("params.augment_lm", "%s draws from the encoder input's masked-LM head: connect a pretrained encoder (encoder.pretrain)", augmentEncoder)
	case fromEncoder && !augmentOn:
		b.Errorf("params.augment_lm", "%s: there is no augmentation without self-training (augment=false, selftrain=false or the crf student)", augmentEncoder)
	case b.Has("encoder") && p.String("encoder_placement") == tagger.EncoderNone && !fromEncoder:
		b.Errorf("params.encoder_placement", "%s leaves the encoder input unused: it only serves augment_lm=%s", tagger.EncoderNone, augmentEncoder)
	}
	vec := vectors(b)
	corpus := trainingCorpus(b)
	var average spec.Ref // the seeds' averaged predictions
	if len(seeds) == 0 {
		return nil // reported above
	}

	// Step 1: noise-robust training, one tagger per seed.
	noise := fanSeeds(b.Node("noise", tagger.StageTrain), seeds, true).Queue("gpu").
		Pass("scheme", "epochs", "min_steps", "word_dropout").Input("embeddings", vec)
	withEncoder(b, noise)
	spanSeeds := p.Ints("span_seeds")
	if !p.Bool("partial") && len(spanSeeds) == 0 {
		refuseLabelNoise(b, "applies to the partial-label CRF seeds of partial=true and to span_seeds")
	}
	switch {
	case p.Bool("partial"):
		// The CRF's marginals are the distributions the ensemble averages;
		// the distilled and self-trained models are token classifiers as
		// in RoSTER.
		partialOnLabels(noise)
		for _, name := range []string{"gce", "removal", "drop_o"} {
			if b.IsSet(name) {
				b.Errorf("params."+name, "applies to the token classifiers, which partial=true replaces with partial-label CRFs")
			}
		}
	case p.Bool("gce"):
		noise.Set("head", tagger.TokenHead).Set("loss", tagger.LossGCE).Pass("q", "drop_o")
	default:
		noise.Set("head", tagger.TokenHead).Set("loss", tagger.LossCE).Pass("drop_o")
	}
	if p.Bool("removal") && !p.Bool("partial") {
		noise.Pass("tau", "update_interval")
	}
	corpus(noise)
	readSplit(b, noise, "dev", "dev")
	seedFan := func(n *spec.NodeBuilder) *spec.NodeBuilder { return fanSeeds(n, seeds, false) }
	// Each seed at each candidate miss rate, the dev input keeping the
	// better per seed: dev kept 0 for every seed on BC5CDR and 0.5 for
	// every seed on CoNLL-2003 and both stand-ins (docs/roster.md).
	seedStep := noise
	var rates []float64
	switch {
	case p.Bool("partial"):
		rates = candidateMissRates(b)
		seedStep = bestMissRate(b, noise, rates, seeds)
	case b.IsSet("miss_rate"):
		b.Errorf("params.miss_rate", "applies to the partial-label CRF seeds of partial=true")
	}
	scoreDev(b, seedStep, seedFan)
	last, model := finalModel{step: seedStep, fan: seedFan, name: b.Name()}, seedStep.Out("model")
	cands := []candidate{{step: seedStep, fan: seedFan, copies: seedCopies(seeds), name: "seed"}}

	// Step 1b: span classifiers with negative sampling, members of the
	// ensemble beside the seeds. They read the same labels another way
	// (whole spans, a sampled O), so their errors differ from the CRFs':
	// on CoNLL-2003 the average of three CRF seeds and three span seeds
	// labels the training split better than either kind's three alone
	// (docs/roster.md).
	var span *spec.NodeBuilder
	switch {
	case len(spanSeeds) > 0 && !p.Bool("ensemble"):
		b.Errorf("params.span_seeds", "the span seeds join the ensemble, which ensemble=false leaves out")
	case len(spanSeeds) > 0:
		span = fanSeeds(b.Node("span", tagger.StageTrain), spanSeeds, true).Queue("gpu").
			Set("head", tagger.SpanHead).Set("loss", tagger.LossNegSample).Set("sampling", tagger.SamplingUniform).
			Pass("scheme", "min_steps", "word_dropout", "type_miss_rates", "mistype_rates").PassAs("epochs", "span_epochs").Input("embeddings", vec)
		withEncoder(b, span)
		corpus(span)
		readSplit(b, span, "dev", "dev")
		spanFan := func(n *spec.NodeBuilder) *spec.NodeBuilder { return fanSeeds(n, spanSeeds, false) }
		scoreDev(b, span, spanFan)
		cands = append(cands, candidate{step: span, fan: spanFan, copies: seedCopies(spanSeeds), name: "span seed"})
	case b.IsSet("span_epochs"):
		b.Errorf("params.span_epochs", "applies to span_seeds, which are none")
	}

	// Step 2: the seeds' predictions of the training corpus averaged and
	// distilled into one tagger.
	if p.Bool("ensemble") && len(seeds) > 0 {
		pred := fanSeeds(b.Node("predict", tagger.StagePredict), seeds, false).Input("model", model)
		corpus(pred)
		avg := b.Node("average", ensemble.StageAverage).Input("predictions", pred.Out("predictions"))
		if span != nil {
			spanPred := fanSeeds(b.Node("predict-span", tagger.StagePredict), spanSeeds, false).Input("model", span.Out("model"))
			corpus(spanPred)
			avg.Input("predictions", spanPred.Out("predictions"))
		}
		distil := b.Node("distil", tagger.StageTrain).Queue("gpu").Pass("scheme", "min_steps", "word_dropout").PassAs("epochs", "distil_epochs").
			Set("seed", seeds[0]).Input("embeddings", vec)
		withEncoder(b, distil)
		if student == studentCRF {
			// The ensemble's labels find more entities than the distant
			// ones; an unlabeled token is still some evidence of O, weaker
			// than a seed's (student_miss_rate).
			labels := b.Node("ensemble-labels", ensemble.StageLabel).Input("predictions", avg.Out("predictions"))
			corpus(labels)
			distil.Set("head", tagger.CRFHead).Set("loss", tagger.LossPartial).PassAs("miss_rate", "student_miss_rate").Input("corpus", labels.Out("labeled"))
		} else {
			distil.Set("head", tagger.TokenHead).Set("loss", tagger.LossKL).Input("soft", avg.Out("predictions"))
			corpus(distil) // its tags are not used: the targets are the average
		}
		readSplit(b, distil, "dev", "dev")
		scoreDev(b, distil, nil)
		last, model = finalModel{step: distil, name: b.Name()}, distil.Out("model")
		cands = append(cands, candidate{step: distil, name: "student"})
		average = avg.Out("predictions")
	}

	// Step 3: self-training.
	if selftrainOn {
		st := b.Node("selftrain", selftrain.StageTagger).Queue("gpu").Input("model", model).
			PassAs("epochs", "selftrain_epochs").PassAs("update_interval", "selftrain_update_interval").Pass("entity_threshold").Set("entity_target", entityTarget)
		selfTraining(b, st, corpus, nil)
		if entityTarget == selftrain.EntityEnsemble {
			st.Input("soft", average)
		}
		switch {
		case !p.Bool("augment"):
		case fromEncoder:
			st.Input("lm", b.In("encoder"))
		default:
			lm := b.Node("lm", augment.StageLM).Queue("gpu").Input("unlabeled", b.In("unlabeled"))
			corpus(lm) // its tokens only
			st.Input("lm", lm.Out("lm"))
		}
		last, model = finalModel{step: st, name: b.Name()}, st.Out("model")
		cands = append(cands, candidate{step: st, name: "self-trained"})
	}

	// Step 4: BOND's teacher-student rounds on the last step's model,
	// whose predictions of the corpus are better labels than the
	// distant ones the seeds started from.
	if p.Bool("teacher_student") {
		// Patience 0: the rounds rise late (on CoNLL-2003 the dev F1 was
		// still rising at the last of four epochs in every seed set, and
		// the stage's patience of 3 stopped one set while it was below
		// the student); the best step on dev is kept either way.
		ts := b.Node("teacher-student", selftrain.StageTeacher).Queue("gpu").Input("model", model).Set("seed", seeds[0]).Set("patience", 0)
		if student == studentCRF && p.Bool("ensemble") {
			ts.PassAs("miss_rate", "student_miss_rate")
		} else if p.Bool("partial") && !p.Bool("ensemble") {
			// The single seed's rate; with several candidates the
			// choice is made at run time, which a param cannot follow.
			if len(rates) > 1 {
				b.Errorf("params.miss_rate", "teacher_student without the ensemble weighs the seed's O by its miss rate: give one rate")
			} else if len(rates) == 1 {
				ts.Set("miss_rate", rates[0])
			}
		}
		selfTraining(b, ts, corpus, nil)
		last = finalModel{step: ts, name: b.Name()}
		cands = append(cands, candidate{step: ts, name: "teacher-student"})
	}
	if p.Bool("select") && (len(cands) > 1 || len(seeds) > 1) {
		if best := bestOnDev(b, cands...); best != nil {
			last = *best
		}
	}
	finish(b, last)
	return nil
}
