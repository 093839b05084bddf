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
// A phrase is a run of capitalized tokens that no title, common word or
// stopword breaks, less the words at its ends that name nothing: a title
// ("Mr.", "Sen."), a word the name lists call common (days, months, "I"), a
// stopword, an initial, and
// at the start a word whose lower-case form the text writes often (the
// "Only" of a sentence start, the "County" left over beside a match). The
// first word of a sentence is capitalized by rule, so there it must never
// be written in lower case in the text to count, nor less a final -s (a
// headline's verb: "Defends Ike"). A headline, most of its
// words in capitals, has no phrases. A run that holds matches beside such
// words is a longer name the gazetteer knows a part of: the phrase then
// replaces the matches it holds.

// The Phrase of a Match that no phrase of the matcher made: a short form
// the corpus defines (abbreviation.go), a capitalized phrase, a longer
// name that holds matches.
const (
	phraseShortForm   = -1
	phraseCapitalized = -2
	phraseLonger      = -3
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
	// heads type a phrase by its last word (NameLists.Heads); may be nil.
	heads map[string]string
}

// capitalizedOf returns the capitalized phrase finder of c where the
// matcher was configured to find them (WithCapitalized) and c's typed
// matches begin with a capital letter often enough (Capitalized.MinShare),
// nil otherwise; and how often they do (zero without WithCapitalized).
// The share takes a scan of c of its own: labeling adds the phrases
// sentence by sentence, after the share is known, and the scan costs far
// less than reading and writing the corpus (BC5CDR's 20,217 sentences
// labeled in 0.8 s either way).
func (m *Matcher) capitalizedOf(c *corpus.Corpus) (*capitalizedPhrases, capitalShare) {
	cfg := m.cfg.capitalized
	if cfg == nil {
		return nil, capitalShare{}
	}
	var share capitalShare
	sc := m.Scanner()
	for _, s := range c.Sentences {
		share.addMatches(s.Tokens, sc.Match(s.Tokens))
	}
	if !share.reaches(cfg.MinShare) {
		return nil, share
	}
	return &capitalizedPhrases{nameless: namelessWords(cfg.Nameless, m.cfg.stopwords), lower: lowerCounts(c), minCommon: cfg.MinCommon, heads: cfg.Heads}, share
}

// capitalShare counts a corpus's typed entities, beside those at the first
// word of a sentence (capitalized by rule), and how many of them begin with
// a capital letter: whether the text writes its names capitalized, which
// is what makes a capitalized phrase likely a name. English news text does
// for nearly all (CoNLL-2003's distant labels: 17,777 of 17,781); a
// biomedical text's chemicals and diseases mostly do not (BC5CDR's dev
// entities: 22.5%, sentence starts included), and there its capitalized
// words are sentence starts, abbreviations and gene names, not the missed
// chemicals.
type capitalShare struct {
	Entities, Capital int
}

// add counts the entities spans of a sentence; those of unknown type say
// nothing of the text's names and are left out.
func (cs *capitalShare) add(tokens []string, spans []corpus.Span) {
	for _, sp := range spans {
		if sp.Label != corpus.UnknownType {
			cs.count(tokens, sp.Start)
		}
	}
}

// addMatches counts the typed matches of a sentence.
func (cs *capitalShare) addMatches(tokens []string, ms []Match) {
	for _, mt := range ms {
		if mt.Kind == Typed {
			cs.count(tokens, mt.Start)
		}
	}
}

// count counts an entity that starts at token start, unless that is the
// sentence's first word.
func (cs *capitalShare) count(tokens []string, start int) {
	if start == 0 {
		return
	}
	cs.Entities++
	if r, _ := utf8.DecodeRuneInString(tokens[start]); unicode.IsUpper(r) {
		cs.Capital++
	}
}

// reaches tells whether the capitalized entities are at least min of
// those counted. With no entity to judge by, the text is taken at its
// word: the phrases are then the only names its labels can hold.
func (cs capitalShare) reaches(min float64) bool {
	return cs.Entities == 0 || float64(cs.Capital) >= min*float64(cs.Entities)
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

// phrases returns the capitalized phrases of a sentence beside its
// entities spans (see find). A longer name among them holds some of spans,
// which a caller that keeps it drops (heldBy).
func (cp *capitalizedPhrases) phrases(tokens []string, spans []corpus.Span) []Match {
	ms := make([]Match, len(spans))
	for i, sp := range spans {
		ms[i] = Match{Start: sp.Start, End: sp.End, Kind: Typed, Type: sp.Label}
	}
	return cp.find(tokens, ms)
}

// span returns a phrase as a span: of its head word's type, or unknown.
func (mt Match) span() corpus.Span {
	if mt.Kind == Typed {
		return corpus.Span{Start: mt.Start, End: mt.End, Label: mt.Type}
	}
	return corpus.Span{Start: mt.Start, End: mt.End, Label: corpus.UnknownType}
}

// heldBy tells whether one of phrases holds the tokens start to end.
func heldBy(phrases []Match, start, end int) bool {
	return slices.ContainsFunc(phrases, func(p Match) bool { return p.Start <= start && end <= p.End })
}

// add returns ms with the capitalized phrases of tokens (find) in place of
// the matches a longer name holds, sorted by start. ms is not modified.
func (cp *capitalizedPhrases) add(tokens []string, ms []Match) []Match {
	phrases := cp.find(tokens, ms)
	if phrases == nil {
		return ms
	}
	out := slices.DeleteFunc(slices.Clone(ms), func(mt Match) bool { return heldBy(phrases, mt.Start, mt.End) })
	out = append(out, phrases...)
	slices.SortFunc(out, func(a, b Match) int { return cmp.Compare(a.Start, b.Start) })
	return out
}

// find returns the capitalized phrases of tokens beside the matches ms, in
// order: unknown-type matches (Phrase phraseCapitalized, or phraseLonger
// for a longer name that holds matches), typed where a head word ends one.
func (cp *capitalizedPhrases) find(tokens []string, ms []Match) []Match {
	if isHeadline(tokens) {
		return nil
	}
	covered := make([]bool, len(tokens))
	person := make([]bool, len(tokens)) // the first token of a person's name
	for _, mt := range ms {
		for i := mt.Start; i < mt.End; i++ {
			covered[i] = true
		}
		person[mt.Start] = mt.Kind == Typed && mt.Type == personType
	}
	// A run is of matched and capitalized words; a title, a common word or
	// a stopword that no match holds ends it ("U.S. Treasury Secretary
	// Robert Rubin" is two names, not one).
	inRun := func(i int) bool {
		return covered[i] || (isCapitalized(tokens[i]) && !cp.nameless[tokens[i]] && !cp.nameless[strings.ToLower(tokens[i])])
	}
	first := slices.IndexFunc(tokens, hasLetterOrDigit)
	var phrases []Match
	for i := 0; i < len(tokens); {
		if !inRun(i) {
			i++
			continue
		}
		j := i
		for j < len(tokens) && inRun(j) {
			j++
		}
		// The words at the run's ends that name nothing are left out, a
		// match's never.
		start, end := i, j
		for start < end && !covered[start] && cp.isNamelessLead(tokens[start], start == first) {
			start++
		}
		for end > start && !covered[end-1] && cp.isNameless(tokens[end-1]) {
			end--
		}
		// Capitalized words before a person's name are a role the name
		// lists do not know ("Controller Arthur Levitt", "US Sens. James
		// O. Eastland"), not a part of the name.
		if k := slices.Index(covered[start:end], true); k > 0 && person[start+k] {
			start += k
		}
		matched, unmatched := false, false
		for k := start; k < end; k++ {
			if covered[k] {
				matched = true
			} else if !cp.isNameless(tokens[k]) {
				unmatched = true
			}
		}
		if unmatched {
			// A match with capitalized words beside it is most often a part
			// of a longer name the gazetteer does not know ("Republican"
			// of "Republican State Committee", "American" of "American
			// Screw Co."): the whole is the entity, of a type the match
			// need not give.
			ph := Match{Start: start, End: end, Kind: Unknown, Phrase: phraseCapitalized}
			if matched {
				ph.Phrase = phraseLonger
			}
			// The last word of a name of two words or more often says its
			// type ("Committee", "County"); alone it names nothing.
			if typ := cp.heads[tokens[end-1]]; typ != "" && end-start >= 2 {
				ph.Kind, ph.Type = Typed, typ
			}
			phrases = append(phrases, ph)
		}
		i = j
	}
	return phrases
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
		// A headline's verb ("Defends Ike", "Sees Jones") is a word the
		// text writes in lower case less its -s.
		return n > 0 || (len(lw) > 3 && strings.HasSuffix(lw, "s") && cp.lower[lw[:len(lw)-1]] > 0)
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
	// Heads type the phrases of two words or more that end in one
	// (NameLists.Heads); the others are of unknown type.
	Heads map[string]string
	// MinShare: the phrases are added only where at least this share of
	// the corpus's typed entities, beside a sentence's first word, begin
	// with a capital letter (capitalShare); 0: always.
	MinShare float64
}

// DefaultMinCapitalShare is the share of the typed entities that must
// begin with a capital letter for a corpus's capitalized phrases to be
// taken as its names: most. The corpora measured lie far to either side
// of it (capitalShare).
const DefaultMinCapitalShare = 0.5

// WithCapitalized makes labeling a corpus also tag its capitalized phrases
// that no gazetteer matched with the unknown type (capitalized.go); nil
// turns it off.
func WithCapitalized(c *Capitalized) Option { return func(cfg *config) { cfg.capitalized = c } }

// CapitalizedReport counts the capitalized phrases the labels hold, and
// says why there are none where the corpus does not write its entities
// capitalized.
type CapitalizedReport struct {
	// Entities and Capital: the typed entities beside a sentence's first
	// word, and how many begin with a capital letter; the phrases were
	// added (Added) where the share reached MinShare.
	Entities int     `json:"entities"`
	Capital  int     `json:"capital"`
	MinShare float64 `json:"min_share"`
	Added    bool    `json:"added"`

	Labeled  int `json:"labeled"`  // occurrences
	Distinct int `json:"distinct"` // distinct phrases
	Longer   int `json:"longer"`   // occurrences that are longer names holding matches
	// Typed counts the occurrences a head word typed, by type.
	Typed map[string]int `json:"typed,omitempty"`
	Top   []PhraseCount  `json:"top"`
}

// withShare records on the report the share that decided whether the
// phrases were added.
func (c *CapitalizedReport) withShare(cs capitalShare, min float64) *CapitalizedReport {
	c.Entities, c.Capital, c.MinShare, c.Added = cs.Entities, cs.Capital, min, cs.reaches(min)
	return c
}

// writeText writes the report under a headline saying what the phrases
// are, with the most frequent.
func (c *CapitalizedReport) writeText(p *printer, what string) {
	if !c.Added {
		p.printf("no capitalized phrases: %d of the labels' %d typed entities beside a sentence's first word begin with a capital letter, under the share %.2f that says a text writes its names capitalized\n",
			c.Capital, c.Entities, c.MinShare)
		return
	}
	p.printf("%s: %d occurrences of %d phrases (%d longer names holding matches; %d of the labels' %d typed entities beside a sentence's first word begin with a capital letter)\n",
		what, c.Labeled, c.Distinct, c.Longer, c.Capital, c.Entities)
	if len(c.Typed) > 0 {
		p.printf("  typed by their last word:")
		for _, t := range slices.Sorted(maps.Keys(c.Typed)) {
			p.printf(" %s %d", t, c.Typed[t])
		}
		p.printf("\n")
	}
	for _, pc := range c.Top {
		p.printf("  %-30s %6d\n", pc.Phrase, pc.Count)
	}
}

// capitalizedReport sums the counted phrases, longer of them longer names
// and typed of them typed by a head word, into a report of the top k.
func capitalizedReport(counts map[string]int, longer int, typed map[string]int, k int) *CapitalizedReport {
	r := &CapitalizedReport{Distinct: len(counts), Longer: longer}
	if len(typed) > 0 {
		r.Typed = typed
	}
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
