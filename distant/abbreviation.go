package distant

import (
	"cmp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/nerflow/nerflow/corpus"
)

// Short forms a corpus defines. Scientific text names a thing once in full
// and then by its abbreviation: "nitroglycerin ( NTG )", then "NTG" alone.
// A dictionary knows nitroglycerin, rarely NTG, and where it lists NTG at
// all it is often as an untyped phrase, so the labels leave most
// abbreviations O or of unknown type, and a tagger learns them so. A
// definition whose long form is a typed match carries that type to every
// occurrence of the short form. Definitions are found as Schwartz and Hearst
// (2003) find them: a short form in parentheses right after its long form,
// every letter and digit of it found in order in the long form, the first
// at the start of one of its words.

// Limits of a short form, as Schwartz and Hearst's: at most two words in
// running text (three tokens here, as tokenizers split "D-pen" into "D - pen")
// and at most ten characters.
const (
	maxShortFormTokens = 3
	maxShortFormLen    = 10
)

// shortForms maps the short forms a corpus defines to the type of their
// long forms.
type shortForms struct {
	types map[string]string // tokens joined by spaces -> type
	// starts holds the first token of every short form in types, so that
	// labeling looks a position up only where one may begin.
	starts map[string]bool
	// defined counts a short form's definitions, type by type, conflicting
	// ones included (for the report).
	defined     map[string]map[string]int
	conflicting int
	maxTokens   int
}

// findShortForms scans the corpus for definitions: a typed match followed
// by "( SF )". Tokenizers and sentence splitters often cut before the
// opening parenthesis, so a sentence that begins with "(" is read as the
// continuation of the one before it: no sentence of running text begins
// with a parenthesized abbreviation. A short form defined with more than
// one type is ambiguous in this corpus and is left out.
func (m *Matcher) findShortForms(c *corpus.Corpus) *shortForms {
	sf := &shortForms{types: map[string]string{}, starts: map[string]bool{}, defined: map[string]map[string]int{}}
	sc := m.Scanner()
	var prevTokens []string
	var prevTyped []Match
	for _, s := range c.Sentences {
		typed := typedMatches(sc.Match(s.Tokens))
		tokens := s.Tokens
		if len(tokens) > 0 && tokens[0] == "(" && len(prevTokens) > 0 {
			joined := append(slices.Clip(prevTokens), tokens...)
			shifted := slices.Clone(prevTyped)
			for _, mt := range typed {
				mt.Start += len(prevTokens)
				mt.End += len(prevTokens)
				shifted = append(shifted, mt)
			}
			// From the parenthesis on: the definitions before it were
			// counted with the sentence before.
			sf.scan(joined, shifted, len(prevTokens))
		} else {
			sf.scan(tokens, typed, 0)
		}
		prevTokens, prevTyped = tokens, typed
	}
	for form, byType := range sf.defined {
		if len(byType) > 1 {
			sf.conflicting++
			continue
		}
		for t := range byType {
			sf.types[form] = t
		}
		first, _, _ := strings.Cut(form, " ")
		sf.starts[first] = true
		sf.maxTokens = max(sf.maxTokens, strings.Count(form, " ")+1)
	}
	return sf
}

// shortFormsOf is findShortForms where the matcher was configured to use
// the corpus's abbreviations (WithAbbreviations), nil otherwise.
func (m *Matcher) shortFormsOf(c *corpus.Corpus) *shortForms {
	if !m.cfg.abbreviations {
		return nil
	}
	return m.findShortForms(c)
}

// typedMatches returns a copy of the typed matches of ms (a Scanner reuses
// its result).
func typedMatches(ms []Match) []Match {
	var out []Match
	for _, mt := range ms {
		if mt.Kind == Typed {
			out = append(out, mt)
		}
	}
	return out
}

// scan records the definitions of one stretch of text whose typed matches
// are typed (in order), those whose parenthesis opens at from or after.
func (sf *shortForms) scan(tokens []string, typed []Match, from int) {
	for i, mt := range typed {
		open := mt.End
		if open < from || open >= len(tokens) || tokens[open] != "(" {
			continue
		}
		end := slices.Index(tokens[open+1:min(len(tokens), open+2+maxShortFormTokens)], ")")
		if end < 1 {
			continue
		}
		short := tokens[open+1 : open+1+end]
		// A typed match inside the parentheses is a name of its own
		// ("aspirin ( ASA )" where the gazetteer knows ASA).
		if i+1 < len(typed) && typed[i+1].Start < open+1+end {
			continue
		}
		if !isShortForm(short) || !longFormFits(strings.Join(short, ""), tokens[mt.Start:mt.End]) {
			continue
		}
		key := strings.Join(short, " ")
		if sf.defined[key] == nil {
			sf.defined[key] = map[string]int{}
		}
		sf.defined[key][mt.Type]++
	}
}

// isShortForm tells whether tokens may be an abbreviation: at most
// maxShortFormLen characters without spaces (two at least), starting with
// a letter or digit, with an upper-case letter. The upper-case letter keeps
// out a lower-case word in parentheses ("( rats )"), which would then label
// the common word everywhere.
func isShortForm(tokens []string) bool {
	s := strings.Join(tokens, "")
	n := utf8.RuneCountInString(s)
	if n < 2 || n > maxShortFormLen {
		return false
	}
	first, _ := utf8.DecodeRuneInString(s)
	if !unicode.IsLetter(first) && !unicode.IsDigit(first) {
		return false
	}
	return strings.IndexFunc(s, unicode.IsUpper) >= 0
}

// longFormFits is Schwartz and Hearst's test: reading both from the end,
// every letter and digit of short is found in long (case ignored), and the
// first one at the start of a word of long.
func longFormFits(short string, long []string) bool {
	lf := []rune(strings.ToLower(strings.Join(long, " ")))
	sr := []rune(strings.ToLower(short))
	j := len(lf) - 1
	for k := len(sr) - 1; k >= 0; k-- {
		c := sr[k]
		if !unicode.IsLetter(c) && !unicode.IsDigit(c) {
			continue
		}
		for j >= 0 && (lf[j] != c || (k == 0 && j > 0 && (unicode.IsLetter(lf[j-1]) || unicode.IsDigit(lf[j-1])))) {
			j--
		}
		if j < 0 {
			return false
		}
		j--
	}
	return true
}

// add returns ms with the occurrences of the short forms in tokens as typed
// matches (Phrase phraseShortForm): where no match covers them, or where an untyped or
// ambiguous match covers exactly them. A typed match always wins: the
// gazetteer's word is taken over the corpus's abbreviation. ms is not
// modified.
func (sf *shortForms) add(tokens []string, ms []Match) []Match {
	if len(sf.types) == 0 {
		return ms
	}
	var out []Match
	for i := 0; i < len(tokens); i++ {
		if !sf.starts[tokens[i]] {
			continue
		}
		for n := min(sf.maxTokens, len(tokens)-i); n >= 1; n-- {
			t, ok := sf.types[strings.Join(tokens[i:i+n], " ")]
			if !ok {
				continue
			}
			j := slices.IndexFunc(ms, func(mt Match) bool { return mt.Start < i+n && i < mt.End })
			if j >= 0 && (ms[j].Kind == Typed || ms[j].Start != i || ms[j].End != i+n) {
				continue
			}
			if out == nil {
				out = slices.Clone(ms)
			}
			short := Match{Start: i, End: i + n, Kind: Typed, Type: t, Phrase: phraseShortForm}
			if j >= 0 {
				out[j] = short // out is ms with matches appended: ms[j] is out[j]
			} else {
				out = append(out, short)
			}
			i += n - 1
			break
		}
	}
	if out == nil {
		return ms
	}
	slices.SortFunc(out, func(a, b Match) int { return cmp.Compare(a.Start, b.Start) })
	return out
}

// ShortFormCount is one short form of the report: its type, how many
// definitions the corpus gives it and how many of its occurrences it
// labeled.
type ShortFormCount struct {
	ShortForm   string `json:"short_form"`
	Type        string `json:"type"`
	Definitions int    `json:"definitions"`
	Labeled     int    `json:"labeled"`
}

// AbbreviationReport is what the labels owe to the corpus's abbreviations.
type AbbreviationReport struct {
	// ShortForms is the number of short forms defined with one type;
	// Conflicting those defined with several, left out.
	ShortForms  int `json:"short_forms"`
	Conflicting int `json:"conflicting"`
	// Labeled counts the occurrences labeled with a short form's type in
	// the corpus (definitions included).
	Labeled int              `json:"labeled"`
	Top     []ShortFormCount `json:"top"`
}

func (sf *shortForms) report(labeled map[string]int, topK int) *AbbreviationReport {
	r := &AbbreviationReport{ShortForms: len(sf.types), Conflicting: sf.conflicting}
	var all []ShortFormCount
	for form, t := range sf.types {
		all = append(all, ShortFormCount{ShortForm: form, Type: t, Definitions: sf.defined[form][t], Labeled: labeled[form]})
		r.Labeled += labeled[form]
	}
	slices.SortFunc(all, func(a, b ShortFormCount) int {
		return cmp.Or(cmp.Compare(b.Labeled, a.Labeled), cmp.Compare(a.ShortForm, b.ShortForm))
	})
	r.Top = all[:min(len(all), topK)]
	return r
}
