package distant

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
)

// Uncertain says how a match that names no single type is labeled: the
// match of an untyped phrase, or of a phrase whose types tie.
type Uncertain int

const (
	// AsUnknown labels the span with corpus.UnknownType: its boundaries are
	// kept, and training ignores its type.
	AsUnknown Uncertain = iota
	// AsOutside labels the span O. It still blocks shorter matches inside
	// it, so a part of a longer name is never labeled on its own.
	AsOutside
)

// ParseUncertain parses "unknown" or "o".
func ParseUncertain(s string) (Uncertain, error) {
	switch strings.ToLower(s) {
	case "unknown", "?":
		return AsUnknown, nil
	case "o", "outside":
		return AsOutside, nil
	}
	return 0, fmt.Errorf("unknown label %q for uncertain matches (want unknown or o)", s)
}

func (u Uncertain) String() string {
	if u == AsOutside {
		return "o"
	}
	return "unknown"
}

// config gathers the options shared by gazetteer loading and matching: both
// must tokenize and normalize phrases the same way.
type config struct {
	tokenize  Tokenizer
	caseMode  CaseMode
	form      UnicodeForm
	stopwords map[string]bool // lower-cased
	ambiguous Uncertain
	untyped   Uncertain
	topK      int
	// abbreviations: labeling a corpus also types the short forms it
	// defines (abbreviation.go).
	abbreviations bool
	// capitalized: labeling a corpus also tags its capitalized phrases
	// between matches with the unknown type (capitalized.go); nil: off.
	capitalized *Capitalized
}

// Option configures Load, NewMatcher and Label.
type Option func(*config)

func newConfig(opts []Option) config {
	c := config{tokenize: WhitespaceTokenizer, topK: 20}
	for _, o := range opts {
		o(&c)
	}
	return c
}

func (c config) normalizer() normalizer { return newNormalizer(c.caseMode, c.form) }

// WithTokenizer sets how phrases are split into tokens (default WhitespaceTokenizer).
func WithTokenizer(t Tokenizer) Option { return func(c *config) { c.tokenize = t } }

// WithCase sets how letter case is compared (default CaseExact).
func WithCase(m CaseMode) Option { return func(c *config) { c.caseMode = m } }

// WithUnicodeForm sets the Unicode normalization of phrases and tokens
// (default FormNone).
func WithUnicodeForm(f UnicodeForm) Option { return func(c *config) { c.form = f } }

// WithStopwords sets words that alone never make an entity: a phrase made
// only of stopwords is not matched. Comparison ignores case.
func WithStopwords(words []string) Option {
	return func(c *config) { c.stopwords = stopwordSet(words) }
}

// stopwordSet returns the stopwords lower-cased, blanks left out.
func stopwordSet(words []string) map[string]bool {
	set := make(map[string]bool, len(words))
	for _, w := range words {
		if w = strings.TrimSpace(w); w != "" {
			set[strings.ToLower(w)] = true
		}
	}
	return set
}

// WithAmbiguous sets how matches of phrases with tied types are labeled
// (default AsUnknown).
func WithAmbiguous(u Uncertain) Option { return func(c *config) { c.ambiguous = u } }

// WithUntyped sets how matches of untyped phrases are labeled (default
// AsUnknown). AsOutside makes an untyped gazetteer a list of phrases that
// only keep typed matches out of longer names.
func WithUntyped(u Uncertain) Option { return func(c *config) { c.untyped = u } }

// policy returns how a match of kind k that is not Typed is labeled.
func (c config) policy(k MatchKind) Uncertain {
	if k == Ambiguous {
		return c.ambiguous
	}
	return c.untyped
}

// WithTopK sets how many frequent and ambiguous phrases a Report lists (default 20).
func WithTopK(k int) Option { return func(c *config) { c.topK = k } }

// WithAbbreviations makes labeling a corpus also type the abbreviations it
// defines: "nitroglycerin ( NTG )" after a typed match of nitroglycerin
// labels every NTG of the corpus, matched as written, with its type where no
// typed match covers it (default off).
func WithAbbreviations(on bool) Option { return func(c *config) { c.abbreviations = on } }

// ReadStopwords reads a stopword list, one word per line; blank lines are skipped.
func ReadStopwords(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("stopwords: %w", err)
	}
	defer f.Close()
	words, err := readLines(f)
	if err != nil {
		return nil, fmt.Errorf("stopwords %s: %w", path, err)
	}
	return words, nil
}

func readLines(r io.Reader) ([]string, error) {
	var words []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), maxLine)
	for sc.Scan() {
		if w := strings.TrimSpace(sc.Text()); w != "" {
			words = append(words, w)
		}
	}
	return words, sc.Err()
}

// isStopPhrase reports whether every token of a phrase is a stopword.
func (c config) isStopPhrase(tokens []string) bool {
	if len(c.stopwords) == 0 {
		return false
	}
	for _, t := range tokens {
		if !c.stopwords[strings.ToLower(t)] {
			return false
		}
	}
	return true
}

// hasStopword reports whether any token of a phrase is a stopword.
func (c config) hasStopword(tokens []string) bool {
	for _, t := range tokens {
		if c.stopwords[strings.ToLower(t)] {
			return true
		}
	}
	return false
}
