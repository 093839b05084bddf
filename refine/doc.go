// Package refine cross-checks distant labels with taggers that never saw
// them, before a method trains on them (CrossWeigh, Wang et al., 2019,
// made to work on distant labels rather than on annotators' slips):
//
//   - refine.folds deals the labeled sentences into K folds. Copy k of the
//     stage writes fold k (held) and the other folds' sentences that
//     mention none of fold k's labeled strings (train): a tagger trained on
//     train has never been told what those strings are, so what it predicts
//     for them in held comes from their context alone.
//   - refine.vote reads every fold's predictions of its held sentences and
//     weighs each labeled string (its lower-cased words and its type) by
//     how many of its mentions the taggers predicted with that span and
//     type. A string below the agreement threshold is marked of unknown
//     type "?", which the taggers leave out of their loss, or made O.
//   - refine.choose keeps whichever labels, refined or given, train the
//     tagger that scores better on the dev split: refinement pays on labels
//     of low precision and costs on labels of high precision
//     (docs/accuracy.md), and a user seldom knows which they have.
//
// The methods on distant labels wire these stages around train.tagger and
// train.predict when asked to (param refine, methods/refine.go); the
// stages know nothing of the taggers beyond the corpora they exchange.
package refine
