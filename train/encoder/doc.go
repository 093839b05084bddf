// Package encoder is nerflow's own pretrained encoder: a RoBERTa-style
// transformer pretrained with the masked-LM objective on whatever
// unlabeled text a team has (the Brown corpus by default here), since no
// pretrained transformer can be downloaded on these machines.
//
// Input: one position per token of the tagger's tokenization, read as a
// word vector (the most frequent words of the pretraining text, optionally
// started from the GloVe-derived vectors of package embeddings) and the
// tagger's character CNN over its spelling, so that a word outside the
// vocabulary still gets a representation. Word-level input rather than
// subwords keeps a token one position (a tagger needs no pooling of
// pieces) and the sequences as short as the sentences (attention is
// quadratic in length, and 2 CPU cores are the budget), while the
// character CNN covers what subwords would: unseen words, case, digits.
//
// Model: learned position vectors, pre-LN (default) or post-LN layers of
// multi-head self-attention with a padding mask and GELU feed-forward
// blocks, dropout (masks from Go generators, so runs are reproducible).
// The masked-LM head (dense, GELU, norm) scores words against the input
// word vectors (tied), so the output layer adds only a bias per word;
// only the ~15% predicted positions reach it, so the vocabulary is not the
// bottleneck.
//
// Objective (RoBERTa's): about 15% of each sentence's tokens are chosen;
// 80% of those read as the mask token (and a mask spelling), 10% as a
// random word, 10% unchanged; the loss is the mean negative log-likelihood
// of the chosen words that are in the vocabulary. Held-out perplexity is
// measured the same way with masks drawn from a fixed seed.
//
// The stage encoder.pretrain (stage.go) pretrains it; the model also
// implements train.LanguageModel (kind "encoder"), so a tagger can read its
// top states as frozen features.
package encoder
