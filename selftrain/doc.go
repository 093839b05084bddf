// Package selftrain is self-training: RoSTER's last step (Train, stage
// selftrain.tagger) and BOND's teacher-student second stage (TrainStudent,
// stage selftrain.teacher, see teacher.go), sharing one loop.
//
// RoSTER's self-trains the distilled tagger on its own sharpened
// predictions. Every update_interval steps the current model predicts the
// training corpus, and its predictions become the targets of the next steps (SoftLabels): over entity types only, the
// type distribution of each token the entity-vs-O head is confident about,
// squared and divided by the type's frequency (RoSTER's eq. 8), fitted with
// KL divergence, and the entity-vs-O decision fitted with binary cross
// entropy.
//
// As RoSTER, it can also fit the type targets on an augmented copy of each
// sentence, a contextual augmentation (package augment) regenerated every
// epoch (WithAugmentation; the stage's input lm).
package selftrain
