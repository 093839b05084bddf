package methods

import (
	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/subset"
	"github.com/nerflow/nerflow/train/tagger"
	"github.com/nerflow/nerflow/train/vsl"
)

// VSL is the variational sequential labeler (Chen et al., 2018) in the
// paper's low-resource setting: a seeded fraction of the training
// sentences kept labeled, a disjoint fraction given as unlabeled text.
//
//	vectors -> [split] -> train (train.vsl) -> eval-train (dev), test -> register
//
// labeled=1 trains on the whole train input (unlabeled text then comes from
// the unlabeled input, if any); semi=false leaves the unlabeled text out
// (the supervised-only ablation: the same labeled sentences, the same
// split node, so both runs share it in the cache).
func init() {
	d := vsl.DefaultHyperparams()
	spec.RegisterMethod(spec.Method{
		Name: "vsl",
		Doc: "Variational sequential labeler (VSL-GG-Hier or -Flat): a BiGRU over fixed word vectors and characters with " +
			"per-token Gaussian latents, a classifier on the label-bearing latent y and the words reconstructed from the latents, " +
			"trained on a seeded fraction of the training sentences kept labeled plus a disjoint fraction as unlabeled text " +
			"(the paper's 10% and 50%); the best epoch on the dev set is kept, scored on the dev and test sets and registered under the spec's name.",
		Params: append([]stages.Param{
			stages.StringParam("variant", d.Model.Variant, "hier: z conditioned on y (VSL-GG-Hier); flat: y and z side by side (VSL-GG-Flat)", stages.OneOf(vsl.Flat, vsl.Hier)),
			stages.BoolParam("semi", true, "learn from the unlabeled text too (false: the labeled sentences alone; ablation)"),
			stages.FloatParam("labeled", 0.1, "fraction of the training sentences kept labeled (1: all of them, no split)", stages.Range(0.0001, 1)),
			stages.FloatParam("unlabeled", 0.5, "fraction of the training sentences, disjoint from the labeled ones, given as unlabeled text", stages.Range(0, 1)),
			stages.IntParam("split_seed", 1, "seed of the split", stages.AtLeast(0)),
			tagger.SchemeParam(d.Model.Scheme, "tag scheme the classifier predicts"),
			stages.IntParam("epochs", d.Run.Epochs, "passes over the labeled sentences", stages.Range(1, 1000)),
			stages.IntParam("patience", d.Run.Patience, "stop after this many epochs without a better dev F1 (0: never)", stages.AtLeast(0)),
			stages.IntParam("kl_warmup", d.Run.KLWarmup, "steps of KL annealing", stages.AtLeast(0)),
			stages.FloatParam("class_weight", d.Run.ClassWeight, "weight of the classification loss against the negative ELBO", stages.Range(0, 1000)),
			stages.FloatParam("unlabeled_weight", d.Run.UnlabeledWeight, "weight of the unlabeled sentences' loss (the negative ELBO) against the labeled ones'", stages.Range(0, 1000)),
			stages.IntParam("recon_words", d.Model.ReconWords, "reconstruction vocabulary: the most frequent words of the training text", stages.Range(1, 1000000)),
			stages.IntParam("seed", int(d.Run.Seed), "seed of the initial weights, batches, dropout and latent samples", stages.AtLeast(0)),
		}, append(fileParams(), tagger.Param("encoder_learning_rate"), tagger.Param("encoder_warmup"))...),
		Inputs: append(corpusInputs("sentences with gold tags, split into the labeled and unlabeled parts"),
			stages.Port{Name: "unlabeled", Kind: "text", Optional: true, Doc: "unlabeled text, one sentence per line, with labeled=1 (else the split gives it)"},
			encoderInput()),
		Build: buildVSL,
	})
}

func buildVSL(b *spec.Builder) error {
	checkFiles(b)
	p := b.Params()
	if !b.Has("vectors") {
		b.Errorf("inputs.vectors", "the VSL reads fixed pretrained word vectors: connect them")
	}
	checkEncoder(b)
	split := p.Float("labeled") < 1
	switch {
	case split && b.Has("unlabeled"):
		b.Errorf("inputs.unlabeled", "with labeled < 1 the split gives the unlabeled text: set labeled: 1 to use this input")
	case split && p.Bool("semi") && p.Float("unlabeled") == 0:
		b.Errorf("params.unlabeled", "semi-supervised training needs unlabeled text: a fraction above 0, or semi: false")
	case !split && b.IsSet("unlabeled"):
		b.Errorf("params.unlabeled", "with labeled: 1 nothing is split: connect the unlabeled input instead")
	}
	t := b.Node("train", vsl.StageTrain).Pass("variant", "scheme", "epochs", "patience", "kl_warmup", "class_weight", "unlabeled_weight", "recon_words", "seed").
		Input("embeddings", vectors(b))
	if b.Has("encoder") {
		// The VSL has no placement: the states join its BiGRU's input.
		t.Input("encoder", b.In("encoder")).Pass("encoder_learning_rate", "encoder_warmup")
	}
	if split {
		s := b.Node("split", subset.StageSplit).PassAs("seed", "split_seed").Pass("labeled", "unlabeled")
		readSplit(b, s, "train", "corpus")
		t.Input("corpus", s.Out("labeled"))
		if p.Bool("semi") {
			t.Input("unlabeled", s.Out("unlabeled"))
		}
	} else {
		readSplit(b, t, "train", "corpus")
		if p.Bool("semi") {
			t.Input("unlabeled", b.In("unlabeled"))
		}
	}
	readSplit(b, t, "dev", "dev")
	finish(b, finalModel{step: t})
	return nil
}
