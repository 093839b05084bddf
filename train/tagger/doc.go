// Package tagger is nerflow's neural tagger, its trainer and its stages,
// on libtorch through package kit.
//
// The tagger reads a sentence as word vectors (pretrained GloVe-derived
// vectors, see package embeddings), a character CNN and casing features,
// runs a BiLSTM over them, and tags with one of three heads: RoSTER's token
// classifier (an entity-vs-O score and an entity-type softmax, combined into
// one distribution over the tags), a linear-chain CRF decoded with Viterbi,
// or a span classifier trained with negative sampling for missing
// annotations (Li et al. 2021), decoded into non-overlapping spans.
//
// The trainer fits it with Adam, a warm-up then linear-decay schedule,
// gradient clipping and dropout on length-bucketed batches, and implements
// the noise-robust first step of RoSTER for distant labels: generalized
// cross entropy, periodic removal of tokens whose distant label the model
// finds unlikely, and random dropping of distant O tokens. Runs are
// reproducible on CPU: all randomness (initial weights, batches, dropout
// masks, dropped tokens) comes from Go generators seeded by the run's seed.
//
// The files, by responsibility:
//
//   - the tagger: model.go (encoder), heads.go and head_*.go (one file per
//     head), crf.go, vocab.go, labels.go, data.go, checkpoint.go (Save,
//     Load), predict.go; Load and Predict need no stage registered;
//   - the trainer: trainer.go (Run, step by step), fit.go (a whole job),
//     losses.go and loss_*.go (one file per loss), loss.go (their
//     arithmetic), noise.go (noisy-label removal);
//   - configuration: hyperparams.go, the one table of hyperparameters that
//     the stage train.tagger and the command nerflow train derive from;
//   - the stages train.tagger, train.predict and train.evaluate: stage.go;
//   - lstm_apart.go: prediction's BiLSTM directions on two threads;
//     the rest of the libtorch plumbing (tensor ownership, Adam and the
//     schedule, threads, memory, cuDNN) is package kit.
//
// A new head or loss is one file, in this package or another: a type
// implementing Head (or Loss) and an init that calls RegisterHead (or
// RegisterLoss); the stage's choices and docs follow from the registry
// (plugin_test.go adds a loss from outside the package). A loss with
// hyperparameters of its own implements ConfigurableLoss: it declares them
// as stage parameters, which train.tagger exposes, and receives their
// values alone.
//
// libtorch keeps its grad mode per OS thread: every goroutine that computes
// with a Tagger must be locked to its thread; the Trainer and Predict run
// on OS threads of their own (kit.OnComputeThread), which also carry libtorch's
// thread count and OpenMP team and end with the computation.
package tagger
