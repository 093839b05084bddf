// Package distant produces distant (weak) labels: it loads gazetteers — lists
// of entity phrases, typed or not — and matches them against tokenized text,
// turning every match into entity tags that training can learn from.
//
// The pieces, in the order data flows through them:
//
//   - Load reads a gazetteer file (typed `Type<TAB>phrase` lists, untyped
//     phrase lists, JSONL, CSV) into a Gazetteer and a LoadReport of the
//     duplicates, conflicts, blank phrases and phrases without tokens it
//     met; malformed input is an error naming file and line.
//   - NewMatcher compiles several gazetteers into one Aho-Corasick automaton
//     over interned token ids. Each phrase's type is settled once: by
//     gazetteer priority, then the phrase as written over case variants;
//     what still ties is Ambiguous, and untyped phrases are Unknown.
//   - A Scanner finds every phrase occurrence of a sentence in one pass and
//     keeps the longest where they overlap (the leftmost among equals).
//   - A Labeler writes the matches as IO, BIO, IOB1 or BIOES tags — Unknown
//     and Ambiguous ones with the type corpus.UnknownType ("?"), or as O —
//     and accumulates a Report: matches per type, coverage, frequent and
//     ambiguous phrases and, for sentences with gold tags, conlleval
//     precision, recall and F1 of the distant labels.
//
// Run does all of it for loaded data; the stage "distant.label" (registered on
// import) and the command `nerflow distant` are built on it.
package distant
