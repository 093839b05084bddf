// Package corpustest builds the small corpora tests train and match on
// from inline text, so that a test shows its sentences and their tags
// where it uses them.
package corpustest

import (
	"strings"

	"github.com/nerflow/nerflow/corpus"
)

// Inline returns a corpus of one sentence per line, its tokens separated
// by white space: a token written word/TAG is word tagged TAG, any other
// is tagged O.
func Inline(lines ...string) *corpus.Corpus {
	c := &corpus.Corpus{}
	for _, line := range lines {
		var s corpus.Sentence
		for _, w := range strings.Fields(line) {
			tok, tag, ok := strings.Cut(w, "/")
			if !ok {
				tag = "O"
			}
			s.Tokens, s.Tags = append(s.Tokens, tok), append(s.Tags, tag)
		}
		c.Sentences = append(c.Sentences, s)
	}
	return c
}
