package distant

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/eval"
)

// Report describes a distant labeling run: what was loaded, what matched,
// how much of the corpus the labels cover, and, with gold data, how good
// the labels are.
type Report struct {
	Scheme      string `json:"scheme"`
	Case        string `json:"case"`
	UnicodeForm string `json:"unicode_form"`
	AmbiguousAs string `json:"ambiguous_as"`
	UntypedAs   string `json:"untyped_as"`

	Gazetteers []LoadReport `json:"gazetteers"`
	Matcher    BuildStats   `json:"matcher"`

	Sentences          int `json:"sentences"`
	Tokens             int `json:"tokens"`
	SentencesWithMatch int `json:"sentences_with_match"`
	// Matches counts typed matches per entity type.
	Matches          map[string]int `json:"matches"`
	UnknownMatches   int            `json:"unknown_matches"`
	AmbiguousMatches int            `json:"ambiguous_matches"`
	TypedTokens      int            `json:"typed_tokens"`
	// UnknownTokens are labeled with the unknown type: untyped and
	// ambiguous matches, unless configured to be O.
	UnknownTokens int `json:"unknown_tokens"`
	// Coverage is TypedTokens/Tokens, UnknownCoverage UnknownTokens/Tokens
	// and SentenceCoverage SentencesWithMatch/Sentences.
	Coverage         float64 `json:"coverage"`
	UnknownCoverage  float64 `json:"unknown_coverage"`
	SentenceCoverage float64 `json:"sentence_coverage"`
	// IOMerges counts adjacent matches of one type that the IO scheme had
	// to write as one entity.
	IOMerges int `json:"io_merges,omitempty"`

	TopPhrases       []PhraseCount `json:"top_phrases"`
	AmbiguousPhrases []PhraseCount `json:"ambiguous_phrases"`

	// Abbreviations says what the corpus's own abbreviations added, when
	// they were used (WithAbbreviations).
	Abbreviations *AbbreviationReport `json:"abbreviations,omitempty"`
	// Capitalized counts the capitalized phrases labeled with the unknown
	// type, when they were (WithCapitalized).
	Capitalized *CapitalizedReport `json:"capitalized,omitempty"`

	Gold *GoldReport `json:"gold,omitempty"`

	// Warnings point at input that is probably a mistake: an empty
	// gazetteer, an entity type that only one place (one gazetteer, or the
	// gold labels) knows, often a typo of another.
	Warnings []string `json:"warnings,omitempty"`
}

// warnings finds the suspicious input of a finished report.
func (r Report) warnings() []string {
	var out []string
	places := map[string][]string{} // type -> the places that have it
	for _, g := range r.Gazetteers {
		if g.Entries == 0 {
			out = append(out, fmt.Sprintf("gazetteer %s is empty: it labels nothing", g.Source))
		}
		for t, n := range g.Types {
			if t != "" && t != corpus.UnknownType && n > 0 {
				places[t] = append(places[t], "gazetteer "+g.Source)
			}
		}
	}
	if r.Gold != nil {
		for t, s := range r.Gold.Report.Types {
			if s.Support > 0 {
				places[t] = append(places[t], "the gold labels")
			}
		}
	}
	// A type that one place alone knows is only suspicious when another
	// place spells a type almost like it ("Chemicals" beside "Chemical"):
	// a list of one type (person names beside a LOC/ORG gazetteer, or an
	// untyped phrase list) is no sign of a typo.
	types := slices.Sorted(maps.Keys(places))
	for _, t := range types {
		ps := places[t]
		if len(ps) != 1 {
			continue
		}
		for _, u := range types {
			if u != t && !slices.Contains(places[u], ps[0]) && nearlySpelled(t, u) {
				out = append(out, fmt.Sprintf("type %s appears only in %s, and %s has %s: a typo?", t, ps[0], places[u][0], u))
				break
			}
		}
	}
	return out
}

// nearlySpelled tells whether two type names differ only in letter case or
// by at most one edit per four letters of the shorter (at least one).
func nearlySpelled(a, b string) bool {
	a, b = strings.ToLower(a), strings.ToLower(b)
	if a == b {
		return true
	}
	ra, rb := []rune(a), []rune(b)
	limit := max(1, min(len(ra), len(rb))/4)
	// Levenshtein distance, one row at a time.
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)] <= limit
}

// PhraseCount is a phrase with its number of matches.
type PhraseCount struct {
	Phrase string   `json:"phrase"`
	Kind   string   `json:"kind"`
	Type   string   `json:"type,omitempty"`
	Types  []string `json:"types,omitempty"` // the tied types of an ambiguous phrase
	Count  int      `json:"count"`
}

// GoldReport scores distant labels against gold labels.
type GoldReport struct {
	Source string `json:"source,omitempty"`
	// Report is the conlleval-style score of the typed distant labels;
	// spans of unknown type count as O.
	Report eval.Report `json:"scores"`
	// UnknownSpans counts spans labeled with the unknown type on the gold
	// sentences, and UnknownExact those of them whose boundaries are
	// exactly those of a gold entity: how much an untyped gazetteer adds.
	UnknownSpans int `json:"unknown_spans"`
	UnknownExact int `json:"unknown_exact"`
}

// WriteText prints the report for people.
func (r Report) WriteText(w io.Writer) error {
	p := &printer{w: w}
	p.printf("distant labels: %d sentences, %d tokens; scheme %s, case %s, unicode %s, untyped as %s, ambiguous as %s\n",
		r.Sentences, r.Tokens, r.Scheme, r.Case, r.UnicodeForm, r.UntypedAs, r.AmbiguousAs)

	for _, w := range r.Warnings {
		p.printf("warning: %s\n", w)
	}
	p.printf("\ngazetteers:\n")
	for _, g := range r.Gazetteers {
		var types []string
		for _, t := range slices.Sorted(maps.Keys(g.Types)) {
			types = append(types, fmt.Sprintf("%s %d", typeOrUntyped(t), g.Types[t]))
		}
		p.printf("  %s (%s, priority %d): %d entries (%s); %d duplicates, %d type conflicts, %d empty, %d without tokens\n",
			g.Source, g.Format, g.Priority, g.Entries, strings.Join(types, ", "),
			g.Duplicates.Count, g.Conflicts.Count, g.Empty.Count, g.NoTokens.Count)
	}
	s := r.Matcher
	p.printf("matcher: %d phrases (case variants included), %d ambiguous, %d stopword-only entries left out, %d tokens in vocabulary, %d states, longest phrase %d tokens\n",
		s.Phrases, s.Ambiguous, s.StopwordPhrases, s.Vocabulary, s.Nodes, s.MaxTokens)

	p.printf("\nmatches:\n")
	for _, t := range slices.Sorted(maps.Keys(r.Matches)) {
		p.printf("  %-12s %8d\n", t, r.Matches[t])
	}
	p.printf("  %-12s %8d\n  %-12s %8d\n", "(unknown)", r.UnknownMatches, "(ambiguous)", r.AmbiguousMatches)
	p.printf("coverage: %.2f%% of tokens typed, %.2f%% of unknown type; %.2f%% of sentences have a match\n",
		100*r.Coverage, 100*r.UnknownCoverage, 100*r.SentenceCoverage)
	if r.IOMerges > 0 {
		p.printf("IO scheme: %d pairs of adjacent same-type matches written as one entity\n", r.IOMerges)
	}
	if a := r.Abbreviations; a != nil {
		p.printf("abbreviations: %d short forms defined after a typed match (%d more defined with several types, left out), %d occurrences labeled\n",
			a.ShortForms, a.Conflicting, a.Labeled)
		for _, f := range a.Top {
			p.printf("  %-12s %-12s %4d definitions %6d labeled\n", f.ShortForm, f.Type, f.Definitions, f.Labeled)
		}
	}
	if c := r.Capitalized; c != nil {
		c.writeText(p, "capitalized phrases no gazetteer matched (of unknown type unless a head word types them)")
	}

	phrases := func(title string, list []PhraseCount) {
		if len(list) == 0 {
			return
		}
		p.printf("\n%s:\n", title)
		for _, pc := range list {
			label := pc.Type
			switch pc.Kind {
			case Unknown.String():
				label = "(unknown)"
			case Ambiguous.String():
				label = strings.Join(pc.Types, "|")
			}
			p.printf("  %8d  %-20s %s\n", pc.Count, label, pc.Phrase)
		}
	}
	phrases("most frequent phrases", r.TopPhrases)
	phrases("ambiguous phrases", r.AmbiguousPhrases)

	if g := r.Gold; g != nil {
		p.printf("\nagainst gold labels")
		if g.Source != "" {
			p.printf(" (%s)", g.Source)
		}
		p.printf(", unknown-type spans read as O:\n")
		if p.err == nil {
			p.err = g.Report.WriteTable(w)
		}
		p.printf("unknown-type spans on the gold sentences: %d, of which %d have exactly a gold entity's boundaries\n",
			g.UnknownSpans, g.UnknownExact)
	}
	return p.err
}

type printer struct {
	w   io.Writer
	err error
}

func (p *printer) printf(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}
