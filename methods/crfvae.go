package methods

import (
	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/registry"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/train"
	"github.com/nerflow/nerflow/train/crfvae"
)

// CRF-VAE: a CRF tagger trained on a few labeled sentences plus unlabeled
// ones, as the posterior of a variational autoencoder (docs/crfvae.md).
//
//	vectors -> train (train.crfvae: labeled + unlabeled) -> evaluate (dev), evaluate-test (test) -> register
func init() {
	d := crfvae.DefaultConfig()
	spec.RegisterMethod(spec.Method{
		Name: "crfvae",
		Doc: "Trains a BiLSTM-CNN-CRF tagger semi-supervised as the posterior of a CRF-VAE: CRF loss on the " +
			"labeled sentences, negative ELBO (relaxed perturb-and-MAP samples, a factored or transformer " +
			"generator of the tokens given the tags, a prior with half its mass on O) on the unlabeled ones; " +
			"with partial, the train input is partially annotated (missing entities tagged O): its O tags are " +
			"marginalized and its sentences are also the unlabeled ones.",
		Params: append([]stages.Param{
			stages.StringParam("generator", d.Generator, "generative model of the tokens given the tags", stages.OneOf(crfvae.Generators...)),
			stages.FloatParam("beta", d.Beta, "weight of the prior term of the ELBO", stages.Range(0, 100)),
			stages.FloatParam("relax_tau", d.Tau, "temperature of the relaxed perturb-and-MAP samples", stages.Range(0.01, 10)),
			stages.FloatParam("unlabeled_weight", d.Weight, "weight of the negative ELBO against the CRF loss", stages.Range(0.0001, 100)),
			stages.BoolParam("partial", false, "the train input is partially annotated: O tags are not observed (marginalized), and its sentences serve as the unlabeled ones"),
			stages.StringParam("scheme", "bio", "tag scheme the tagger predicts", stages.OneOf("io", "bio", "bioes")),
			stages.IntParam("epochs", 15, "training epochs", stages.Range(1, 1000)),
			stages.IntParam("patience", 4, "stop after this many epochs without a better dev F1 (0: never)", stages.AtLeast(0)),
			stages.IntParam("seed", 1, "seed of the initial weights, batches, dropout and noise", stages.AtLeast(0)),
			stages.StringParam("unlabeled_file", "", "file of the unlabeled input holding the sentences (empty: its only file)"),
		}, fileParams()...),
		Inputs: append(corpusInputs("labeled (or, with partial, partially annotated) training sentences"),
			stages.Port{Name: "unlabeled", Kind: "corpus", Optional: true, Doc: "unlabeled sentences (required unless partial)"}),
		Build: buildCRFVAE,
	})
}

func buildCRFVAE(b *spec.Builder) error {
	checkFiles(b)
	p := b.Params()
	partial := p.Bool("partial")
	switch {
	case !partial && !b.Has("unlabeled"):
		b.Errorf("inputs.unlabeled", "connect the unlabeled sentences (or set partial)")
	case partial && b.Has("unlabeled"):
		b.Errorf("inputs.unlabeled", "with partial, the train input's sentences are the unlabeled ones")
	case !b.Has("unlabeled") && b.IsSet("unlabeled_file"):
		b.Errorf("params.unlabeled_file", "names a file of the input unlabeled, which is not connected")
	}
	vec := vectors(b, b.In("unlabeled"))
	t := b.Node("train", crfvae.StageName).Pass("generator", "beta", "relax_tau", "unlabeled_weight", "scheme", "epochs", "patience", "seed").
		Input("embeddings", vec)
	readSplit(b, t, "train", "corpus")
	readSplit(b, t, "dev", "dev")
	if partial {
		t.Set("drop_o", 1)
		readSplit(b, t, "train", "unlabeled")
	} else {
		t.Input("unlabeled", b.In("unlabeled")).PassAs("unlabeled_file", "unlabeled_file")
	}
	evaluateAndRegister(b, t.Out("model"))
	return nil
}

// evaluateAndRegister scores a tagger on the dev and test inputs given and
// registers it with their reports.
func evaluateAndRegister(b *spec.Builder, model spec.Ref) {
	var reports []spec.Ref
	for _, e := range []struct{ node, split string }{{"evaluate", "dev"}, {"evaluate-test", "test"}} {
		if b.Has(e.split) {
			ev := b.Node(e.node, train.StageEvaluate).Input("model", model)
			readSplit(b, ev, e.split, "gold")
			reports = append(reports, ev.Out("report"))
		}
	}
	b.Node("register", registry.StageName).Input("model", model).Input("reports", reports...)
}
