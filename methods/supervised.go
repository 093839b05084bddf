package methods

import (
	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/train/tagger"
)

// Supervised trains one tagger on gold labels: the upper bound the weakly
// supervised methods are compared with.
//
//	vectors (with a vectors input) -> train -> eval-train (dev), test -> register
func init() {
	spec.RegisterMethod(spec.Method{
		Name: "supervised",
		Doc: "Trains a BiLSTM-CNN tagger (CRF head by default) on gold labels, selects the epoch on the dev " +
			"set, scores it on the dev and test sets given, and registers it under the spec's name.",
		Params: append([]stages.Param{
			stages.StringParam("head", tagger.CRFHead, "output layer: crf, or token (RoSTER's classifier, trained with cross entropy)", stages.OneOf(tagger.TokenHead, tagger.CRFHead)),
			tagger.SchemeParam("bio", "tag scheme the tagger predicts"),
			stages.IntParam("epochs", 15, "training epochs", stages.Range(1, 1000)),
			stages.IntParam("patience", 4, "stop after this many epochs without a better dev F1 (0: never)", stages.AtLeast(0)),
			stages.IntParam("seed", 1, "seed of the initial weights, batches and dropout", stages.AtLeast(0)),
		}, append(fileParams(), encoderParams()...)...),
		Inputs: append(corpusInputs("sentences with gold tags"), encoderInput()),
		Build:  buildSupervised,
	})
}

func buildSupervised(b *spec.Builder) error {
	checkFiles(b)
	checkEncoder(b)
	p := b.Params()
	loss := tagger.LossCRF
	if p.String("head") == tagger.TokenHead {
		loss = tagger.LossCE
	}
	vec := vectors(b)
	t := b.Node("train", tagger.StageTrain).Pass("head", "scheme", "epochs", "patience", "seed").Set("loss", loss).
		Input("embeddings", vec)
	withEncoder(b, t)
	readSplit(b, t, "train", "corpus")
	readSplit(b, t, "dev", "dev")
	finish(b, finalModel{step: t})
	return nil
}
