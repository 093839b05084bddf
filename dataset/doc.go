// Package dataset is the I/O that stages and commands share: corpus inputs
// (every format of package corpus, a text file paired with a labels file)
// and per-token predictions (hard tags plus each token's distribution over
// the tag set), which ensembling, distillation and self-training exchange.
//
// A corpus input is described once, by a Source: which file of the
// artifact (or which path), its labels file, its format. Stages declare
// the parameters of a corpus port with SourceParams and read it with
// ReadInput; commands read local files with Source.ReadFile. Every error
// names the file and, for bad content, the line.
//
// The predictions format is documented in docs/predictions.md.
package dataset
