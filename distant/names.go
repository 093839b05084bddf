package distant

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/nerflow/nerflow/corpus"
)

// personType is the type of the person names the name lists find.
const personType = "PER"

// A typed gazetteer names the people it knows; most people in a text are
// not in it. Person names have a shape that lists of common first names
// and of titles recognize without knowing the person: a known first name
// followed by capitalized words ("John F. Tims", "Anna Weber Jr."), or a
// title followed by capitalized words ("Sen. Kennedy", "Mrs. Smith"; the
// title stays outside the name, as CoNLL annotates). MineNames finds such
// phrases in a corpus and returns them as a PER gazetteer, which then
// labels the corpus beside the other gazetteers (the longest match wins,
// and a phrase that another gazetteer types otherwise is ambiguous, "?").

// NameLists are the word lists name mining uses.
type NameLists struct {
	First  map[string]bool // first names, as written ("John")
	Titles map[string]bool // titles and honorifics, as written ("Mr.", "Sen.")
	// Common are capitalized words that name nothing on their own, as
	// written: days, months, the pronoun I. Capitalized phrases leave them
	// out (WithCapitalized); name mining does not read them.
	Common map[string]bool
	// Heads are the words that end names of one type, with the type, as
	// written ("Committee": ORG, "County": LOC): a capitalized phrase of
	// two words or more ending in one is an entity of that type
	// (WithCapitalized), and in name mining one of another type than PER
	// ends a person's name ("Morris County" is none).
	Heads map[string]string
	// Otherwise are the words a typed gazetteer lists alone as another
	// type than PER (Georgia as LOC), set by DropTypedOtherwise: such a
	// word starts no name, and a name ending in it does not make it a
	// surname of its own (Houston of Sam Houston stays the city).
	Otherwise map[string]bool
}

// ReadNameLists reads name lists: one entry a line, "first<TAB>John",
// "title<TAB>Sen.", "common<TAB>Friday" or "head:ORG<TAB>Committee" (a
// word that ends names of type ORG), blank lines and lines starting with #
// ignored. name is the file's name, for errors.
func ReadNameLists(r io.Reader, name string, into *NameLists) error {
	if into.First == nil {
		into.First, into.Titles = map[string]bool{}, map[string]bool{}
	}
	if into.Common == nil {
		into.Common = map[string]bool{}
	}
	if into.Heads == nil {
		into.Heads = map[string]string{}
	}
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		kind, word, ok := strings.Cut(text, "\t")
		word = strings.TrimSpace(word)
		switch {
		case !ok || word == "" || strings.ContainsAny(word, " \t"):
			return fmt.Errorf("%s:%d: want KIND<TAB>WORD (one word), got %q", name, line, text)
		case kind == "first":
			into.First[word] = true
		case kind == "title":
			into.Titles[word] = true
		case kind == "common":
			into.Common[word] = true
		case strings.HasPrefix(kind, "head:"):
			typ := strings.TrimPrefix(kind, "head:")
			if typ == "" || typ == corpus.UnknownType || strings.ContainsAny(typ, " -") {
				return fmt.Errorf("%s:%d: kind %q: want head:TYPE, TYPE an entity type (ORG)", name, line, kind)
			}
			if prev, dup := into.Heads[word]; dup && prev != typ {
				return fmt.Errorf("%s:%d: head word %q of type %s was given type %s before", name, line, word, typ, prev)
			}
			into.Heads[word] = typ
		default:
			return fmt.Errorf("%s:%d: kind %q: want first, title, common or head:TYPE", name, line, kind)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// Nameless returns the words of the lists that name nothing on their own:
// the titles and the common words.
func (l NameLists) Nameless() map[string]bool {
	out := maps.Clone(l.Titles)
	if out == nil {
		out = map[string]bool{}
	}
	maps.Copy(out, l.Common)
	return out
}

// DropTypedOtherwise removes from the first names those that a typed
// gazetteer lists as a one-word entry of a type other than PER (Georgia as
// LOC): such a word starts no name. It records every such one-word entry
// in Otherwise and returns the first names removed.
func (l *NameLists) DropTypedOtherwise(gazetteers []*Gazetteer) []string {
	var dropped []string
	for _, g := range gazetteers {
		for _, e := range g.Entries {
			if len(e.Tokens) != 1 || e.Type == "" || e.Type == personType {
				continue
			}
			if l.Otherwise == nil {
				l.Otherwise = map[string]bool{}
			}
			l.Otherwise[e.Tokens[0]] = true
			if l.First[e.Tokens[0]] {
				delete(l.First, e.Tokens[0])
				dropped = append(dropped, e.Tokens[0])
			}
		}
	}
	return dropped
}

// nameSuffixes end a name without being capitalized words of their own
// shape.
var nameSuffixes = map[string]bool{"Jr.": true, "Sr.": true, "II": true, "III": true, "IV": true, "2d": true, "3d": true}

// MinedNames is what MineNames found.
type MinedNames struct {
	// Phrases are the distinct person names found, in order of first
	// appearance, each with its count.
	Phrases []string
	Counts  map[string]int
	// Ambiguous lists the first names left out because the corpus also
	// uses them as ordinary words (their lower-case form is frequent).
	Ambiguous []string
	// Surnames are the last words of the names of two words or more
	// ("Barnett" of "Ross Barnett"), in order of first appearance: news
	// text names a person in full once and by the surname after that.
	// Phrases that are also a name found on its own are not repeated here.
	Surnames []string
}

// MineNames finds person names in c's sentences: a first name that the
// corpus does not also use as a common word, followed by capitalized words
// and initials (at least one word that is not an initial); or a title
// followed by capitalized words and initials, the title left out. A word
// is common when its lower-case form occurs at least minCommon times in c:
// a common first name (Will, May, Mark in English text) starts no name,
// and a common capitalized word (County, Court) ends one.
func MineNames(c *corpus.Corpus, lists NameLists, minCommon int) MinedNames {
	return newTextFinder(lists, c, minCommon).mine(c)
}

// mine finds the names of c's sentences; f is c's finder (newTextFinder).
func (f *nameFinder) mine(c *corpus.Corpus) MinedNames {
	ambiguous := map[string]bool{}
	out := MinedNames{Counts: map[string]int{}}
	for _, s := range c.Sentences {
		for _, sp := range f.find(s.Tokens, ambiguous) {
			phrase := strings.Join(s.Tokens[sp.Start:sp.End], " ")
			if out.Counts[phrase] == 0 {
				out.Phrases = append(out.Phrases, phrase)
			}
			out.Counts[phrase]++
		}
	}
	out.Ambiguous = slices.Sorted(maps.Keys(ambiguous))
	seen := map[string]bool{}
	for _, p := range out.Phrases {
		if sur := f.surname(strings.Fields(p)); sur != "" && out.Counts[sur] == 0 && !seen[sur] {
			seen[sur] = true
			out.Surnames = append(out.Surnames, sur)
		}
	}
	return out
}

// surname returns the surname of a name's words: its last capitalized
// word, after any suffixes and initials, when the name has a word before
// it; "" when there is none or it may be something else alone: a title, a
// word a gazetteer types otherwise, a word the text also writes in lower
// case. A name found by its first name may be a place (Stewart Avenue,
// Warren Street): its last word alone would tag every street, so a word
// the text ever writes as a word, however rarely, is no surname.
func (f *nameFinder) surname(words []string) string {
	end := len(words)
	for end > 0 && (nameSuffixes[words[end-1]] || isInitial(words[end-1])) {
		end--
	}
	if end < 2 {
		return ""
	}
	w := words[end-1]
	if !isNameWord(w) || f.stop[w] || f.lists.Otherwise[w] || f.lower[strings.ToLower(w)] > 0 {
		return ""
	}
	return w
}

// CommonWords returns the lower-case words (those that begin with a
// lower-case letter) that occur at least minCommon times in c, sorted:
// what MineNames takes for common words of the text.
func CommonWords(c *corpus.Corpus, minCommon int) []string {
	return commonOf(lowerCounts(c), minCommon)
}

// lowerCounts counts the words of c that begin with a lower-case letter.
func lowerCounts(c *corpus.Corpus) map[string]int {
	lower := map[string]int{}
	for _, s := range c.Sentences {
		for _, tok := range s.Tokens {
			if r, _ := utf8.DecodeRuneInString(tok); unicode.IsLower(r) {
				lower[tok]++
			}
		}
	}
	return lower
}

// commonOf returns the words counted at least minCommon times, sorted.
func commonOf(lower map[string]int, minCommon int) []string {
	var out []string
	for w, n := range lower {
		if n >= minCommon {
			out = append(out, w)
		}
	}
	slices.Sort(out)
	return out
}

// nameFinder finds person names one sentence at a time, by MineNames's
// rules, given the text's common words.
type nameFinder struct {
	lists  NameLists
	common map[string]bool // lower-case words common in the text
	stop   map[string]bool // words that end a name: titles, capitalized common words
	lower  map[string]int  // the text's lower-case words, counted (a text's finder; surname)
}

// newTextFinder returns the finder of the names of the text c: its words
// written in lower case at least minCommon times are its common words,
// and every word it writes in lower case is no surname. The text's words
// are counted once for both.
func newTextFinder(lists NameLists, c *corpus.Corpus, minCommon int) *nameFinder {
	lower := lowerCounts(c)
	f := newNameFinder(lists, commonOf(lower, minCommon))
	f.lower = lower
	return f
}

func newNameFinder(lists NameLists, common []string) *nameFinder {
	f := &nameFinder{lists: lists, common: map[string]bool{}, stop: maps.Clone(lists.Titles)}
	if f.stop == nil {
		f.stop = map[string]bool{}
	}
	// A capitalized word whose lower-case form is common in the text is a
	// word of a title or an organization (County, Court, Hospital), not of
	// a name; titles end a name too, and so does a head word of another
	// type than PER, which a small text may never write in lower case
	// ("Morris County" is no person).
	for w, typ := range lists.Heads {
		if typ != personType {
			f.stop[w] = true
		}
	}
	for _, w := range common {
		f.common[w] = true
		r, size := utf8.DecodeRuneInString(w)
		f.stop[string(unicode.ToUpper(r))+w[size:]] = true
	}
	return f
}

// find returns the names of a sentence as PER spans, in order; a first
// name left out as a common word is added to ambiguous (if not nil).
func (f *nameFinder) find(toks []string, ambiguous map[string]bool) []corpus.Span {
	var out []corpus.Span
	for i := 0; i < len(toks); i++ {
		tok := toks[i]
		switch {
		case f.lists.Titles[tok]:
			if end := nameRun(toks, i+1, f.stop); end > i+1 {
				out = append(out, corpus.Span{Start: i + 1, End: end, Label: personType})
				i = end - 1
			}
		case f.lists.First[tok]:
			if f.common[strings.ToLower(tok)] {
				if ambiguous != nil {
					ambiguous[tok] = true
				}
				continue
			}
			if end := nameRun(toks, i+1, f.stop); end > i+1 {
				out = append(out, corpus.Span{Start: i, End: end, Label: personType})
				i = end - 1
			}
		}
	}
	return out
}

// nameRun returns the end of the run of name words starting at from:
// capitalized words and initials, then any suffixes, or from itself when
// the run has no word but initials. A stop word (a title: "Vice President
// Johnson" names Johnson; a common word: "Fulton County") ends the run.
func nameRun(toks []string, from int, stop map[string]bool) int {
	end, words := from, 0
	for end < len(toks) {
		tok := toks[end]
		switch {
		case stop[tok]:
			goto suffixes
		case isInitial(tok):
		case isNameWord(tok):
			words++
		default:
			goto suffixes
		}
		end++
	}
suffixes:
	for end < len(toks) && nameSuffixes[toks[end]] && words > 0 {
		end++
	}
	if words == 0 {
		return from
	}
	return end
}

// isInitial reports an initial: one upper-case letter and a period.
func isInitial(tok string) bool {
	r, n := utf8.DecodeRuneInString(tok)
	return unicode.IsUpper(r) && tok[n:] == "."
}

// isNameWord reports a capitalized word: an upper-case letter, then
// letters, apostrophes or hyphens, at least one of them lower-case (an
// all-capitals token is an acronym or a headline, not a name).
func isNameWord(tok string) bool {
	r, n := utf8.DecodeRuneInString(tok)
	if !unicode.IsUpper(r) || nameSuffixes[tok] {
		return false
	}
	hasLower := false
	for _, c := range tok[n:] {
		switch {
		case unicode.IsLower(c):
			hasLower = true
		case unicode.IsLetter(c) || c == '\'' || c == '-':
		default:
			return false
		}
	}
	return hasLower
}

// Gazetteer returns the names as a loaded gazetteer of type PER named
// name, read with opts as any gazetteer file is (WriteGazetteer's lines).
func (m MinedNames) Gazetteer(name string, opts ...Option) (*Gazetteer, error) {
	var tsv bytes.Buffer
	if err := m.WriteGazetteer(&tsv); err != nil {
		return nil, err
	}
	return Read(&tsv, Source{Path: name, Format: FormatTyped}, opts...)
}

// WriteGazetteer writes the names and then the surnames as a typed
// gazetteer of type PER, one "PER<TAB>phrase" line each.
func (m MinedNames) WriteGazetteer(w io.Writer) error {
	bw := bufio.NewWriter(w)
	for _, p := range slices.Concat(m.Phrases, m.Surnames) {
		if _, err := fmt.Fprintf(bw, "PER\t%s\n", p); err != nil {
			return err
		}
	}
	return bw.Flush()
}
