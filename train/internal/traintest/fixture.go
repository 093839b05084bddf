// Package traintest holds the tiny corpus that the tests of the models
// under train/ train on.
package traintest

import (
	"strings"

	"github.com/nerflow/nerflow/corpus"
)

// Fixture is a tiny corpus, token/TAG (O when untagged), one sentence a
// line.
var Fixture = []string{
	"John/B-PER Smith/I-PER lives in Paris/B-LOC .",
	"Mary/B-PER visited Berlin/B-LOC yesterday .",
	"The mayor of Rome/B-LOC met Anna/B-PER Weber/I-PER .",
	"Peter/B-PER flew to London/B-LOC on Monday .",
	"In Madrid/B-LOC , Carlos/B-PER Ruiz/I-PER won .",
	"Berlin/B-LOC and Paris/B-LOC are cities .",
	"Anna/B-PER likes Rome/B-LOC .",
	"Smith/B-PER said nothing .",
	"It rained in London/B-LOC .",
	"Carlos/B-PER met John/B-PER in Madrid/B-LOC .",
}

// Corpus parses lines of the fixture's notation.
func Corpus(lines []string) *corpus.Corpus {
	c := &corpus.Corpus{}
	for _, line := range lines {
		var s corpus.Sentence
		for _, w := range strings.Fields(line) {
			tok, tag, ok := strings.Cut(w, "/")
			if !ok {
				tag = "O"
			}
			s.Tokens = append(s.Tokens, tok)
			s.Tags = append(s.Tags, tag)
		}
		c.Sentences = append(c.Sentences, s)
	}
	return c
}

// Paths enumerates every tag path of length n over k tags, for checking a
// CRF's dynamic programs against brute force.
func Paths(n, k int) [][]int {
	if n == 0 {
		return [][]int{nil}
	}
	var out [][]int
	for _, p := range Paths(n-1, k) {
		for j := range k {
			out = append(out, append(append([]int(nil), p...), j))
		}
	}
	return out
}
