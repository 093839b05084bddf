package methods

import (
	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/subset"
	"github.com/nerflow/nerflow/train/crfvae"
	"github.com/nerflow/nerflow/train/tagger"
)

// CRF-VAE: a CRF tagger trained on a few labeled sentences plus unlabeled
// ones, as the posterior of a variational autoencoder (docs/crfvae.md).
//
//	split (subset.split: labeled and the rest unlabeled) or mask (subset.mask, partial)
//	vectors -> train (train.crfvae) -> eval-train (dev), test -> register
func init() {
	d := crfvae.DefaultConfig()
	spec.RegisterMethod(spec.Method{
		Name: "crfvae",
		Doc: "Trains a BiLSTM-CNN-CRF tagger semi-supervised as the posterior of a CRF-VAE: CRF loss on the " +
			"labeled sentences, negative ELBO (relaxed perturb-and-MAP samples, a factored or transformer " +
			"generator of the tokens given the tags, a prior with half its mass on O) on the unlabeled ones. " +
			"The train input is split (a fraction kept labeled, the rest or the unlabeled input as unlabeled " +
			"text), or with partial > 0 partially annotated (each entity dropped with that probability, every " +
			"sentence kept, its O tags marginalized and its sentences also the unlabeled ones).",
		Params: append([]stages.Param{
			stages.StringParam("generator", d.Generator, "generative model of the tokens given the tags", stages.OneOf(crfvae.Generators...)),
			stages.FloatParam("beta", d.Beta, "weight of the prior term of the ELBO", stages.Range(0, 100)),
			stages.FloatParam("relax_tau", d.Tau, "temperature of the relaxed perturb-and-MAP samples", stages.Range(0.01, 10)),
			stages.FloatParam("unlabeled_weight", d.Weight, "weight of the negative ELBO against the CRF loss", stages.Range(0.0001, 100)),
			stages.FloatParam("labeled", 0.1, "fraction of the train input's sentences kept labeled (subset.split), the rest unlabeled unless the unlabeled input is connected; 1: the train input is the labeled set as is", stages.Range(0.0001, 1)),
			stages.FloatParam("partial", 0, "probability that an entity of the train input is dropped (subset.mask): every sentence kept, partially annotated (0: off)", stages.Range(0, 1)),
			tagger.SchemeParam("bio", "tag scheme the tagger predicts"),
			stages.IntParam("epochs", 15, "training epochs", stages.Range(1, 1000)),
			stages.IntParam("patience", 4, "stop after this many epochs without a better dev F1 (0: never)", stages.AtLeast(0)),
			stages.IntParam("seed", 1, "seed of the split, the mask, the initial weights, batches, dropout and noise", stages.AtLeast(0)),
			stages.StringParam("unlabeled_file", "", "file of the unlabeled input holding the sentences (empty: its only file)"),
		}, append(fileParams(), encoderParams()...)...),
		Inputs: append(corpusInputs("sentences with gold tags, split into labeled and unlabeled ones (or masked, with partial)"),
			stages.Port{Name: "unlabeled", Kind: "text", Optional: true, Doc: "unlabeled sentences (instead of the split's rest)"},
			encoderInput()),
		Build: buildCRFVAE,
	})
}

func buildCRFVAE(b *spec.Builder) error {
	checkFiles(b)
	checkEncoder(b)
	p := b.Params()
	partial, labeled := p.Float("partial") > 0, p.Float("labeled")
	switch {
	case partial && b.Has("unlabeled"):
		b.Errorf("inputs.unlabeled", "with partial, the train input's sentences are the unlabeled ones")
	case partial && b.IsSet("labeled"):
		b.Errorf("params.labeled", "with partial, every sentence is kept (partially annotated)")
	case labeled == 1 && !partial && !b.Has("unlabeled"):
		b.Errorf("inputs.unlabeled", "with labeled 1 the train input has no sentences to spare: connect unlabeled sentences")
	case !b.Has("unlabeled") && b.IsSet("unlabeled_file"):
		b.Errorf("params.unlabeled_file", "names a file of the input unlabeled, which is not connected")
	}
	vec := vectors(b, b.In("unlabeled"))
	t := b.Node("train", crfvae.StageName).Pass("generator", "beta", "relax_tau", "unlabeled_weight", "scheme", "epochs", "patience", "seed").
		Input("embeddings", vec)
	withEncoder(b, t) // the posterior is a tagger: the encoder under its BiLSTM feeds the CRF and the ELBO alike
	readSplit(b, t, "dev", "dev")
	switch {
	case partial:
		mask := b.Node("mask", subset.StageMask).PassAs("p", "partial").Pass("seed")
		readSplit(b, mask, "train", "corpus")
		t.Input("corpus", mask.Out("masked")).Set("drop_o", 1).Set("corpus_unlabeled", true)
	case labeled < 1:
		split := b.Node("split", subset.StageSplit).Pass("labeled", "seed").Set("unlabeled_rest", !b.Has("unlabeled"))
		if b.Has("unlabeled") {
			split.Set("unlabeled", 0)
		}
		readSplit(b, split, "train", "corpus")
		t.Input("corpus", split.Out("labeled"))
		if !b.Has("unlabeled") {
			t.Input("unlabeled", split.Out("unlabeled"))
		}
	default:
		readSplit(b, t, "train", "corpus")
	}
	if b.Has("unlabeled") {
		t.Input("unlabeled", b.In("unlabeled")).PassAs("unlabeled_file", "unlabeled_file")
	}
	finish(b, finalModel{step: t})
	return nil
}
