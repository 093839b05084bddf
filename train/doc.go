// Package train is nerflow's neural tagger and its trainer, on libtorch
// through gotch.
//
// The tagger reads a sentence as word vectors (pretrained GloVe-derived
// vectors, see package embeddings), a character CNN and casing features,
// runs a BiLSTM over them, and tags with one of two heads: RoSTER's token
// classifier (an entity-vs-O score and an entity-type softmax, combined into
// one distribution over the tags) or a linear-chain CRF decoded with Viterbi.
//
// The trainer fits it with Adam, a warm-up then linear-decay schedule,
// gradient clipping and dropout on length-bucketed batches, and implements
// the noise-robust first step of RoSTER for distant labels: generalized
// cross entropy, periodic removal of tokens whose distant label the model
// finds unlikely, and random dropping of distant O tokens. Runs are
// reproducible on CPU: all randomness (initial weights, batches, dropout
// masks, dropped tokens) comes from Go generators seeded by the run's seed.
//
// libtorch keeps its grad mode per OS thread: every goroutine that computes
// with a Tagger must be locked to its thread (runtime.LockOSThread); the
// Trainer and Predict do it themselves.
package train
