// Package distant produces distant (weak) labels: it loads gazetteers — lists
// of entity phrases, typed or not — and matches them against tokenized text,
// turning every match into entity tags that training can learn from.
//
// The pieces, in the order data flows through them:
//
//   - Load reads a gazetteer file (typed or untyped text lists, JSONL, CSV)
//     into a Gazetteer and a LoadReport of what it had to skip.
//   - NewMatcher compiles several gazetteers into one token-level
//     Aho-Corasick automaton; each phrase's type is resolved once, by
//     gazetteer priority, and otherwise marked ambiguous.
//   - A Scanner finds all phrase occurrences in a sentence in one pass and
//     keeps the longest ones first (Matcher.Scanner).
//   - Label runs a Matcher over a whole corpus, writes tags in IO, BIO or
//     BIOES, and fills a Report (coverage, frequent and ambiguous phrases,
//     and the precision of the distant labels when gold tags are given).
package distant
