// Package selftrain is RoSTER's last step: self-training of the distilled
// tagger on its own sharpened predictions. Every update_interval steps the
// current model predicts the training corpus, and its predictions become
// the targets of the next steps (SoftLabels): over entity types only, the
// type distribution of each token the entity-vs-O head is confident about,
// squared and divided by the type's frequency (RoSTER's eq. 8), fitted with
// KL divergence, and the entity-vs-O decision fitted with binary cross
// entropy.
//
// RoSTER also fits the targets on an augmented copy of each sentence
// (contextual augmentation with a language model, regenerated each epoch).
// That input is not implemented yet: package augment is not in main.
package selftrain
