// Package corpus holds nerflow's in-memory representation of tagged text and
// the readers and writers of the file formats it exchanges with users.
package corpus

import "fmt"

// Sentence is one tokenized sentence. Tags, when present, has exactly one
// tag per token in the corpus's tag scheme; an unlabeled sentence has nil Tags.
type Sentence struct {
	Tokens []string `json:"tokens"`
	Tags   []string `json:"tags,omitempty"`
	// DocStart marks the first sentence of a document (CoNLL's -DOCSTART-).
	DocStart bool `json:"doc_start,omitempty"`
}

// Corpus is an ordered list of sentences.
type Corpus struct {
	Sentences []Sentence
}

// NumTokens returns the number of tokens over all sentences.
func (c *Corpus) NumTokens() int {
	n := 0
	for _, s := range c.Sentences {
		n += len(s.Tokens)
	}
	return n
}

// Tokens returns the sentences' tokens (shared with the corpus, not
// copied), for what reads text without tags: language models, encoders.
func (c *Corpus) Tokens() [][]string {
	out := make([][]string, len(c.Sentences))
	for i, s := range c.Sentences {
		out[i] = s.Tokens
	}
	return out
}

// MapSentences returns f of each sentence of c, in order; an error names
// the (1-based) sentence it came from, which is how nerflow points at a
// problem in a corpus read from a file.
func MapSentences[T any](c *Corpus, f func(Sentence) (T, error)) ([]T, error) {
	out := make([]T, len(c.Sentences))
	for i, s := range c.Sentences {
		v, err := f(s)
		if err != nil {
			return nil, fmt.Errorf("sentence %d: %w", i+1, err)
		}
		out[i] = v
	}
	return out, nil
}

// UnknownType is the entity type of spans that are known to be entities but
// whose type is not: matches of an untyped gazetteer ("entity-like phrase")
// or of a phrase with several equally likely types in distant labeling. They
// are written as ordinary tags of this type ("B-?", "I-?", "S-?", ...), so
// every format and scheme carries them with their boundaries. Training should
// not learn "?" as a type: it may drop these tokens from its loss, or use
// them only where the type does not matter (an entity-vs-outside decision).
// Scoring against gold labels should read them as O.
const UnknownType = "?"
