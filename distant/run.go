package distant

import (
	"fmt"
	"strings"

	"github.com/nerflow/nerflow/corpus"
)

// Run is distant labeling from loaded data to labels and report, shared by
// the command and the stage: it compiles the gazetteers, labels every
// sentence of c in scheme and, when gold is not nil, labels the gold
// sentences with the same matcher and scores them against their tags. The
// gold sentences need not be part of c: a held-out set with gold tags is
// scored as it is, and c's statistics do not include it.
func Run(c *corpus.Corpus, gazetteers []*Gazetteer, gold *corpus.Corpus, scheme corpus.Scheme, opts ...Option) (*corpus.Corpus, Report, error) {
	m, err := NewMatcher(gazetteers, opts...)
	if err != nil {
		return nil, Report{}, err
	}
	return m.Run(c, gold, scheme)
}

// Run is Run with a compiled matcher.
func (m *Matcher) Run(c, gold *corpus.Corpus, scheme corpus.Scheme) (*corpus.Corpus, Report, error) {
	labeled, report, err := labelAndScore(m, c, gold, scheme)
	if err == nil {
		report.Warnings = report.warnings()
	}
	return labeled, report, err
}

// EntrySentences returns one labeled sentence per typed entry of the
// gazetteers m was compiled from: the entry's tokens, tagged by m (so
// ambiguous, stopword and conflicting entries come out as they would in
// running text), each token sequence once, in gazetteer order. Appended to
// a distantly labeled corpus, they show a tagger every entry, also those
// the corpus never mentions, which it otherwise cannot learn. Entries that
// label to nothing but O or the unknown type are left out: they teach no
// type.
func (m *Matcher) EntrySentences(gazetteers []*Gazetteer, scheme corpus.Scheme) (*corpus.Corpus, error) {
	l, err := m.NewLabeler(scheme)
	if err != nil {
		return nil, err
	}
	out := &corpus.Corpus{}
	seen := map[string]bool{}
	for _, g := range gazetteers {
		for _, e := range g.Entries {
			key := strings.Join(e.Tokens, " ")
			if e.Type == "" || len(e.Tokens) == 0 || seen[key] {
				continue
			}
			seen[key] = true
			tags, err := l.Label(e.Tokens)
			if err != nil {
				return nil, fmt.Errorf("%s line %d (%q): %w", g.Name, e.Line, e.Phrase, err)
			}
			typed := false
			for _, tag := range tags {
				t, err := scheme.ParseTag(tag)
				typed = typed || (err == nil && t.Prefix != 'O' && t.Type != corpus.UnknownType)
			}
			if typed {
				out.Sentences = append(out.Sentences, corpus.Sentence{Tokens: e.Tokens, Tags: tags})
			}
		}
	}
	return out, nil
}

// Spread returns at most n of the sentences, spread evenly over them in
// their order (the i-th kept is at floor(i·len/n)): all of them when there
// are no more than n. An even spread over a gazetteer in file order keeps
// each type and each part of an alphabetized list in proportion, without a
// seed to carry.
func Spread(sentences []corpus.Sentence, n int) []corpus.Sentence {
	if n < 0 {
		n = 0
	}
	if len(sentences) <= n {
		return sentences
	}
	out := make([]corpus.Sentence, n)
	for i := range n {
		out[i] = sentences[i*len(sentences)/n]
	}
	return out
}
