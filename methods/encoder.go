package methods

import (
	"slices"

	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/train/tagger"
)

// A pretrained encoder (stage encoder.pretrain, docs/encoder.md) that a
// method fine-tunes: the method's optional input encoder, connected to
// every node that trains a tagger from scratch (train.tagger,
// crfvae.train), with the placement and the encoder's learning rate; the
// nodes that continue training a model (selftrain.tagger,
// selftrain.teacher) get the learning rate only, since the model they load
// carries its fine-tuned encoder. The encoder is an input, not a node the
// method adds, so that one pretraining (a node of the spec's own, or an
// artifact exported from another run) serves every method; encoder.pretrain
// is cached by its text and parameters either way.

// encoderInput declares the input encoder of a method.
func encoderInput() stages.Port {
	return stages.Port{Name: "encoder", Kind: "encoder", Optional: true,
		Doc: "a pretrained encoder (stage encoder.pretrain's output: a node of the spec's own, e.g. pretrain.encoder, or an exported artifact) fine-tuned under every tagger the method trains (docs/encoder.md)"}
}

// encoderParams declares the fine-tuning parameters of a method with an
// encoder input. placements are the placements beyond under and replace
// that the method accepts (roster's none: the encoder serves its
// augmentation only).
func encoderParams(placements ...string) []stages.Param {
	doc := "with the encoder input: where its states go, under (beside the word representation, under the BiLSTM) or replace (straight to the head, no BiLSTM)"
	if slices.Contains(placements, tagger.EncoderNone) {
		doc += "; none: no tagger reads it (it only serves augment_lm=encoder)"
	}
	return []stages.Param{
		stages.StringParam("encoder_placement", tagger.EncoderUnder, doc,
			stages.OneOf(append([]string{tagger.EncoderUnder, tagger.EncoderReplace}, placements...)...)),
		tagger.Param("encoder_learning_rate"),
		tagger.Param("encoder_warmup"),
	}
}

// finetunes says whether the method's taggers read the encoder input.
func finetunes(b *spec.Builder) bool {
	return b.Has("encoder") && b.Params().String("encoder_placement") != tagger.EncoderNone
}

// checkEncoder reports fine-tuning parameters set without the encoder
// input.
func checkEncoder(b *spec.Builder) {
	if b.Has("encoder") {
		return
	}
	for _, name := range []string{"encoder_placement", "encoder_learning_rate", "encoder_warmup"} {
		if b.IsSet(name) {
			b.Errorf("params."+name, "only matters with the encoder input: connect a pretrained encoder (encoder.pretrain)")
		}
	}
}

// withEncoder connects the encoder input, if given, to a node that trains
// a tagger from scratch.
func withEncoder(b *spec.Builder, n *spec.NodeBuilder) *spec.NodeBuilder {
	if !finetunes(b) {
		return n
	}
	return n.Input("encoder", b.In("encoder")).Pass("encoder_placement", "encoder_learning_rate", "encoder_warmup")
}

// selfTraining connects a node that goes on training a model on its own
// predictions of the training corpus (RoSTER's self-training, BOND's
// teacher-student rounds) as every such step is: the encoder's learning
// rate, the corpus (its tags are not used), the dev split it keeps its
// best step on, and its score there (fan: n's fan-out, nil for none).
func selfTraining(b *spec.Builder, n *spec.NodeBuilder, corpus func(*spec.NodeBuilder), fan fanout) {
	tuneEncoder(b, n)
	corpus(n)
	readSplit(b, n, "dev", "dev")
	scoreDev(b, n, fan)
}

// tuneEncoder gives a node that continues training a model with the
// encoder (a self-training stage) the encoder's learning rate.
func tuneEncoder(b *spec.Builder, n *spec.NodeBuilder) *spec.NodeBuilder {
	if !finetunes(b) {
		return n
	}
	return n.Pass("encoder_learning_rate", "encoder_warmup")
}
