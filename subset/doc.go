// Package subset derives weaker corpora from a gold one, for experiments
// that ask how a method copes with less or worse supervision than the
// gold labels give:
//
//   - subset.mask drops each gold entity with probability p (seeded): the
//     dropped entity's tokens become O, as in the "missing annotations"
//     (unlabeled entity problem) experiments of span-based negative
//     sampling, where a partially annotated corpus is simulated from a
//     fully annotated one.
//   - subset.noise makes distant tags worse in the way a matcher of low
//     precision errs (dropped, retyped and cut entities, false matches on
//     capitalized words), each decision drawn once per surface string, for
//     the question of how a method copes with labels as poor as
//     knowledge-base matching gives on open-domain text.
//   - subset.split keeps a small share of the labeled sentences (the
//     low-resource splits).
//
// Each stage writes its corpus in the shared dataset format (package
// dataset: the format and scheme recorded on the artifact, so that
// consumers read it as written) plus a report of what it kept.
package subset
