// Package kit is the libtorch kit that nerflow's models (package
// train/tagger, train/lm, train/vsl, train/crfvae and the ones to come) are
// written on, over gotch:
//
//   - the training loop: Fit runs every model's training (see Fit for what
//     it owns and Learner for what a model brings), and StageOptions binds
//     it to a pipeline stage's checkpoints and progress;
//   - tensor ownership: a Graph records every tensor of one computation and
//     frees them together; Guard turns libtorch's errors (Abort) into Go
//     errors instead of gotch's log.Fatal;
//   - parameters: Initializer draws them from a seeded Go generator, so
//     that runs are reproducible on CPU; NamedParams, SaveTensors,
//     LoadWeights and friends read and write them in libtorch's format;
//   - optimization: Adam with its moments in tensors (checkpoints hold
//     them) and global-norm clipping; LearningRate, linear warm-up then
//     linear decay;
//   - threads: OnComputeThread runs a training or a prediction on an OS
//     thread of its own with its share of the cores (SetThreads fixes the
//     count); NoGrad turns gradient tracking off on the calling thread;
//     LSTMHelperFor runs a bidirectional LSTM layer's directions apart in
//     prediction;
//   - the shared layers: the character CNN (CharRows, Graph.CharCNN),
//     Graph.Dropout with reproducible masks, FlattenLSTM for cuDNN;
//   - memory: the allocator in use and the process's resident size, which
//     trainings report per epoch.
//
// A model trains on Fit by implementing Learner: Weights (what Adam steps
// and what checkpoints name), StepsPerEpoch (for the schedule), StartEpoch
// (its batches and random streams, drawn from the seed and the epoch so
// that a resumed run trains as the uninterrupted one), Step (forward, loss,
// then Step.Update), EndEpoch (its report and log line); Evaluator adds a
// dev set (best weights, patience, EvalEvery), Checkpointer checkpoints
// and resumption. train/lm/train.go is the shortest example,
// train/tagger/trainer.go the fullest.
//
// libtorch keeps its grad mode and its intra-op thread count per OS thread:
// every goroutine that computes must be locked to its thread, which
// OnComputeThread and NoGrad do.
package kit
