package distant

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/nerflow/nerflow/corpus"
)

// Capitalized phrases. In English running text a word written with a
// capital inside a sentence is a name far more often than not, and a
// gazetteer knows few of the names a text holds: on the sample's test
// split the labels find half the entities, and 209 of the 302 capitalized
// phrases between their matches are exactly a missed entity. Such a phrase
// says "some entity, type unknown": it is labeled with the unknown type
// "?", which a tagger may learn as an entity of whatever type its context
// gives (AutoNER's untyped phrases, mined from the text itself instead of a
// second dictionary).
//
// A phrase is a run of capitalized tokens that no match covers or touches,
// less the words at its ends that name nothing: a title ("Mr.", "Sen."), a
// word the name lists call common (days, months, "I"), a stopword, an initial, and
// at the start a word whose lower-case form the text writes often (the
// "Only" of a sentence start, the "County" left over beside a match). The
// first word of a sentence is capitalized by rule, so there it must never
// be written in lower case in the text to count. A headline, most of its
// words in capitals, has no phrases.

// The Phrase of a Match that no phrase of the matcher made: a short form
// the corpus defines (abbreviation.go), a capitalized phrase.
const (
	phraseShortForm   = -1
	phraseCapitalized = -2
)

// capitalizedPhrases finds the capitalized phrases of a corpus's sentences.
type capitalizedPhrases struct {
	nameless map[string]bool // titles, common capitalized words, stopwords
	lower    map[string]int  // lower-case occurrences of each word in the corpus
	// common are lower-case words known to be common apart from lower
	// (the training text's, for an overlay): counted minCommon times at
	// least. It may be nil.
	common    map[string]bool
	minCommon int
}

// capitalizedOf returns the capitalized phrase finder of c where the
// matcher was configured to find them (WithCapitalized), nil otherwise.
func (m *Matcher) capitalizedOf(c *corpus.Corpus) *capitalizedPhrases {
	cfg := m.cfg.capitalized
	if cfg == nil {
		return nil
	}
	return &capitalizedPhrases{nameless: namelessWords(cfg.Nameless, m.cfg.stopwords), lower: lowerCounts(c), minCommon: cfg.MinCommon}
}

// namelessWords returns the words that begin or end no phrase: those of
// nameless and the stopwords (lower-cased: isNameless also looks a word up
// lower-cased).
func namelessWords(nameless, stopwords map[string]bool) map[string]bool {
	all := maps.Clone(nameless)
	if all == nil {
		all = map[string]bool{}
	}
	maps.Copy(all, stopwords)
	return all
}

// phrases returns the capitalized phrases of a sentence between spans.
func (cp *capitalizedPhrases) phrases(tokens []string, spans []corpus.Span) []corpus.Span {
	ms := make([]Match, len(spans))
	for i, sp := range spans {
		ms[i] = Match{Start: sp.Start, End: sp.End, Kind: Typed}
	}
	var out []corpus.Span
	for _, mt := range cp.add(tokens, ms) {
		if mt.Phrase == phraseCapitalized {
			out = append(out, corpus.Span{Start: mt.Start, End: mt.End, Label: corpus.UnknownType})
		}
	}
	return out
}

// add returns ms with the capitalized phrases of tokens between its matches
// as unknown-type matches (Phrase phraseCapitalized), sorted by start. ms
// is not modified.
func (cp *capitalizedPhrases) add(tokens []string, ms []Match) []Match {
	if isHeadline(tokens) {
		return ms
	}
	covered := make([]bool, len(tokens))
	for _, mt := range ms {
		for i := mt.Start; i < mt.End; i++ {
			covered[i] = true
		}
	}
	first := slices.IndexFunc(tokens, hasLetterOrDigit)
	var out []Match
	for i := 0; i < len(tokens); {
		if covered[i] || !isCapitalized(tokens[i]) {
			i++
			continue
		}
		j := i
		for j < len(tokens) && !covered[j] && isCapitalized(tokens[j]) {
			j++
		}
		if (i > 0 && covered[i-1]) || (j < len(tokens) && covered[j]) {
			// Touching a match, the run is more likely the rest of a
			// longer name ("American Screw Co." beside the match American)
			// than a name of its own.
			i = j
			continue
		}
		start, end := i, j
		for start < end && cp.isNamelessLead(tokens[start], start == first) {
			start++
		}
		for end > start && cp.isNameless(tokens[end-1]) {
			end--
		}
		if start < end {
			if out == nil {
				out = slices.Clone(ms)
			}
			out = append(out, Match{Start: start, End: end, Kind: Unknown, Phrase: phraseCapitalized})
		}
		i = j
	}
	if out == nil {
		return ms
	}
	slices.SortFunc(out, func(a, b Match) int { return cmp.Compare(a.Start, b.Start) })
	return out
}

// isNameless tells whether a word names nothing wherever it stands in a
// phrase: a title, a common capitalized word, a stopword, an initial, a
// name's suffix (Jr.).
func (cp *capitalizedPhrases) isNameless(w string) bool {
	return cp.nameless[w] || cp.nameless[strings.ToLower(w)] || isInitial(w) || nameSuffixes[w]
}

// isNamelessLead tells whether the first word of a run names nothing: as
// isNameless says, or a word the text writes in lower case often enough (at the
// start of a sentence, at all).
func (cp *capitalizedPhrases) isNamelessLead(w string, sentenceStart bool) bool {
	lw := strings.ToLower(w)
	if cp.isNameless(w) || cp.common[lw] {
		return true
	}
	n := cp.lower[lw]
	if sentenceStart {
		return n > 0
	}
	return n >= cp.minCommon
}

// isHeadline tells whether most of a sentence's words are written in
// capitals ("SOCCER - JAPAN GET LUCKY WIN", "KANSAS CITY 59 72"): there a
// capital says nothing of a name.
func isHeadline(tokens []string) bool {
	words, upper := 0, 0
	for _, t := range tokens {
		letters := 0
		allUpper := true
		for _, r := range t {
			if unicode.IsLetter(r) {
				letters++
				allUpper = allUpper && unicode.IsUpper(r)
			}
		}
		if letters == 0 {
			continue
		}
		words++
		if letters >= 2 && allUpper {
			upper++
		}
	}
	return upper >= 2 && 2*upper > words
}

// isCapitalized tells whether a token begins with an upper-case letter.
func isCapitalized(tok string) bool {
	r, _ := utf8.DecodeRuneInString(tok)
	return unicode.IsUpper(r)
}

// hasLetterOrDigit tells whether a token holds a letter or a digit: the
// first such token of a sentence is its start (quotes and dashes before it
// are not).
func hasLetterOrDigit(tok string) bool {
	return strings.IndexFunc(tok, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) >= 0
}

// Capitalized configures capitalized phrases (WithCapitalized).
type Capitalized struct {
	// Nameless are capitalized words that name nothing on their own:
	// titles and common words of the name lists (NameLists.Nameless).
	Nameless map[string]bool
	// MinCommon: a phrase's first word whose lower-case form occurs this
	// often in the text is a common word and is left out of it.
	MinCommon int
}

// WithCapitalized makes labeling a corpus also tag its capitalized phrases
// that no gazetteer matched with the unknown type (capitalized.go); nil
// turns it off.
func WithCapitalized(c *Capitalized) Option { return func(cfg *config) { cfg.capitalized = c } }

// CapitalizedReport counts the capitalized phrases the labels hold.
type CapitalizedReport struct {
	Labeled  int           `json:"labeled"`  // occurrences
	Distinct int           `json:"distinct"` // distinct phrases
	Top      []PhraseCount `json:"top"`
}

// writeText writes the report under a headline saying what the phrases
// are, with the most frequent.
func (c *CapitalizedReport) writeText(p *printer, what string) {
	p.printf("%s: %d occurrences of %d phrases\n", what, c.Labeled, c.Distinct)
	for _, pc := range c.Top {
		p.printf("  %-30s %6d\n", pc.Phrase, pc.Count)
	}
}

// capitalizedReport sums the counted phrases into a report of the top k.
func capitalizedReport(counts map[string]int, k int) *CapitalizedReport {
	r := &CapitalizedReport{Distinct: len(counts)}
	phrases := slices.Collect(maps.Keys(counts))
	for _, n := range counts {
		r.Labeled += n
	}
	slices.SortFunc(phrases, func(a, b string) int { return cmp.Or(cmp.Compare(counts[b], counts[a]), cmp.Compare(a, b)) })
	for _, p := range phrases[:min(k, len(phrases))] {
		r.Top = append(r.Top, PhraseCount{Phrase: p, Kind: Unknown.String(), Count: counts[p]})
	}
	return r
}
