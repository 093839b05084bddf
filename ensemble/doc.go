// Package ensemble is RoSTER's ensemble step: the per-token probabilities
// of K taggers trained with different seeds, averaged over the training
// corpus (stage ensemble.average), become the soft targets one tagger is
// distilled into.
//
// Distillation is not a stage of its own: the trainer already fits soft
// targets with KL divergence (loss kl of train.tagger, input soft), so the
// distilled model is train.tagger with loss kl, 2 epochs (RoSTER's default)
// and the output of ensemble.average as its soft input.
package ensemble
