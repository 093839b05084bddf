package vsl

import (
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/train/tagger"
)

// Hyperparams are every setting of a VSL and its training, declared once
// in the table of fields below, from which the stage train.vsl's
// parameters, their docs and their reading follow.
type Hyperparams struct {
	Model Config
	Run   TrainConfig
}

// DefaultHyperparams is DefaultConfig trained with DefaultTrainConfig.
func DefaultHyperparams() Hyperparams {
	return Hyperparams{Model: DefaultConfig(), Run: DefaultTrainConfig()}
}

func (h *Hyperparams) fields() []tagger.Hyperparam {
	m, r := &h.Model, &h.Run
	intp, floatp, stringp := tagger.IntField, tagger.FloatField, tagger.StringField
	return append([]tagger.Hyperparam{
		// Architecture.
		stringp(&m.Variant, "variant", "hier: z conditioned on y, the word reconstructed from z (VSL-GG-Hier); flat: y and z side by side (VSL-GG-Flat)", stages.OneOf(Flat, Hier)),
		tagger.SchemeField(&m.Scheme, "tag scheme the classifier predicts"),
		intp(&m.Hidden, "hidden", "GRU units per direction", stages.Range(1, 4096)),
		intp(&m.YDim, "y_dim", "size of the label-bearing latent y", stages.Range(1, 4096)),
		intp(&m.ZDim, "z_dim", "size of the latent z", stages.Range(1, 4096)),
		intp(&m.ReconWords, "recon_words", "reconstruction softmax: the most frequent words of the training text (labeled and unlabeled), the others one unknown class", stages.Range(1, 1000000)),
		intp(&m.CharDim, "char_dim", "character vector size", stages.Range(1, 1024)),
		intp(&m.CharFilters, "char_filters", "character CNN filters", stages.Range(1, 4096)),
		intp(&m.CharKernel, "char_kernel", "character CNN width (odd)", stages.Range(1, 15)),
		stringp(&m.Classify, "classify", "what the classifier reads in training: mean (of q(y|x), as at prediction) or sample (of y, as in the paper)", stages.OneOf(ClassifyMean, ClassifySample)),
		floatp(&m.Dropout, "dropout", "dropout on the BiGRU's input and output", stages.Range(0, 0.95)),
		// Objective.
		floatp(&r.KLWeight, "kl_weight", "weight of the KL terms after annealing", stages.Range(0, 100)),
		intp(&r.KLWarmup, "kl_warmup", "steps over which the KL weight rises linearly from 0 (KL annealing; 0: none)", stages.AtLeast(0)),
		floatp(&r.ClassWeight, "class_weight", "weight of the labeled tokens' cross entropy against the negative ELBO", stages.Range(0, 1000)),
		floatp(&r.UnlabeledWeight, "unlabeled_weight", "weight of an unlabeled batch's loss (its negative ELBO) in a step, against the labeled batch's", stages.Range(0, 1000)),
		// Optimization.
		intp(&r.Epochs, "epochs", "passes over the labeled sentences; each step pairs a labeled batch with an unlabeled one", stages.Range(1, 1000)),
		intp(&r.BatchSize, "batch_size", "sentences per batch (labeled, and unlabeled)", stages.Range(1, 4096)),
	}, append(append(tagger.OptimizerFields(&r.LearningRate, &r.Warmup, &r.MaxGradNorm), tagger.EncoderFields(&r.EncoderLearningRate, &r.EncoderWarmup)...), []tagger.Hyperparam{
		intp(&r.Patience, "patience", "stop after this many epochs without a better dev F1 (0: never)", stages.AtLeast(0)),
		tagger.SeedField(&r.Seed, "seed of the initial weights, batches, dropout and latent samples"),
	}...)...)
}

// HyperparamDecls declares the hyperparameters as stage parameters, with
// the defaults of DefaultHyperparams.
func HyperparamDecls() []stages.Param {
	h := DefaultHyperparams()
	return tagger.DeclsOf(h.fields())
}

// HyperparamsOf reads the hyperparameters from a stage's parameters
// (declared with HyperparamDecls, so already checked).
func HyperparamsOf(p stages.Params) Hyperparams {
	h := DefaultHyperparams()
	tagger.ReadInto(h.fields(), p)
	return h
}
