package distant

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/nerflow/nerflow/corpus"
)

// Boundary is what distant labels say about the gap between two adjacent
// tokens, AutoNER's Tie-or-Break label (Shang et al., 2018).
type Boundary uint8

const (
	// Break: the tokens are in different phrases (or outside any).
	Break Boundary = iota
	// Tie: both tokens are inside one matched phrase of known type(s).
	Tie
	// UnknownBoundary: the labels cannot tell. Either token is inside a
	// phrase of unknown type (an untyped high-quality phrase, as AutoNER's
	// dict_full: it is an entity-like phrase, but whether its neighbours
	// continue it is not known either), or overlapping occurrences disagree
	// about the gap (one ties the tokens, the other puts a boundary there).
	UnknownBoundary
)

func (b Boundary) String() string {
	switch b {
	case Break:
		return "break"
	case Tie:
		return "tie"
	case UnknownBoundary:
		return "unknown"
	}
	return fmt.Sprintf("Boundary(%d)", int(b))
}

// Segment is a run of tokens [Start, End) the Tie-or-Break labels type as a
// whole: a matched phrase, or one unmatched token.
type Segment struct {
	Start, End int
	// Types are the segment's entity types: nil for a non-entity (AutoNER's
	// None), one type for a typed phrase, several for a phrase the
	// gazetteers give tied types, and corpus.UnknownType alone for a phrase
	// of unknown type, which teaches boundaries but no type.
	Types []string
}

// Unknown says whether the segment is a phrase of unknown type.
func (s Segment) Unknown() bool { return len(s.Types) == 1 && s.Types[0] == corpus.UnknownType }

// TieBreakSentence is one sentence with its Tie-or-Break labels.
type TieBreakSentence struct {
	Tokens []string
	// Gaps[i] is the boundary between token i and token i+1
	// (len(Tokens)-1 of them); a sentence's own ends are breaks.
	Gaps []Boundary
	// Segments cover every token, in order.
	Segments []Segment
}

// TieBreakReport counts the Tie-or-Break labels of a corpus.
type TieBreakReport struct {
	Sentences int `json:"sentences"`
	Tokens    int `json:"tokens"`
	Ties      int `json:"ties"`
	Breaks    int `json:"breaks"`
	Unknown   int `json:"unknown"`
	// Crossing counts the gaps made unknown by overlapping occurrences
	// that disagree, a subset of Unknown.
	Crossing int `json:"crossing"`
	// Segments counts the typed phrase segments per type set (types joined
	// by commas); UnknownSegments the phrases of unknown type.
	Segments        map[string]int `json:"segments"`
	UnknownSegments int            `json:"unknown_segments"`
	Matcher         BuildStats     `json:"matcher"`
	Gazetteers      []LoadReport   `json:"gazetteers"`
}

// TieBreaker writes Tie-or-Break labels sentence by sentence and counts
// them. It is not safe for concurrent use.
type TieBreaker struct {
	m     *Matcher
	sc    *Scanner
	r     TieBreakReport
	short *shortForms // the corpus's abbreviations (nil: off)
}

// NewTieBreaker returns a TieBreaker over m's phrases. Matches are
// resolved as for Label (longest first), so the Tie-or-Break labels and the
// tags of Label agree on every phrase; an untyped or ambiguous phrase that
// m's options label O is no phrase here either.
func (m *Matcher) NewTieBreaker() *TieBreaker {
	return &TieBreaker{m: m, sc: m.Scanner(), r: TieBreakReport{Segments: map[string]int{}}}
}

// Label returns the Tie-or-Break labels of a sentence (tokens shared).
func (tb *TieBreaker) Label(tokens []string) TieBreakSentence {
	n := len(tokens)
	s := TieBreakSentence{Tokens: tokens}
	if n == 0 {
		return s
	}
	ms := tb.sc.Match(tokens)
	if tb.short != nil {
		ms = tb.short.add(tokens, ms)
	}
	// seg[i] is the index in s.Segments of token i's segment.
	seg := make([]int, n)
	next := 0
	addToken := func(i int) {
		seg[i] = len(s.Segments)
		s.Segments = append(s.Segments, Segment{Start: i, End: i + 1})
	}
	for _, mt := range ms {
		types := []string{mt.Type} // a short form (abbreviation.go)
		if mt.Phrase >= 0 {
			types = tb.typesOf(mt.Phrase)
		}
		if types == nil {
			continue // labeled O: as unmatched tokens
		}
		for ; next < mt.Start; next++ {
			addToken(next)
		}
		for i := mt.Start; i < mt.End; i++ {
			seg[i] = len(s.Segments)
		}
		s.Segments = append(s.Segments, Segment{Start: mt.Start, End: mt.End, Types: types})
		next = mt.End
	}
	for ; next < n; next++ {
		addToken(next)
	}

	s.Gaps = make([]Boundary, n-1)
	for i := range s.Gaps {
		a, b := s.Segments[seg[i]], s.Segments[seg[i+1]]
		switch {
		case a.Unknown() || b.Unknown():
			s.Gaps[i] = UnknownBoundary
		case seg[i] == seg[i+1]:
			s.Gaps[i] = Tie
		default:
			s.Gaps[i] = Break
		}
	}
	// An occurrence that lost to a longer (or more leftward) one it
	// crosses, not one nested in the phrase that won, disagrees with the
	// resolved labels: inside it the winner breaks where it ties, and at
	// its edges the winner ties where it breaks.
	for _, r := range tb.sc.raw {
		start, end := int(r.start), int(r.end)
		if seg[start] == seg[end-1] && s.Segments[seg[start]].Types != nil {
			continue // nested in a phrase (or that phrase itself)
		}
		if tb.typesOf(int(r.key)) == nil {
			continue // a phrase labeled O asserts nothing
		}
		for i := start; i < end-1; i++ {
			if s.Gaps[i] == Break {
				s.Gaps[i] = UnknownBoundary
				tb.r.Crossing++
			}
		}
		for _, i := range []int{start - 1, end - 1} {
			if i >= 0 && i < n-1 && s.Gaps[i] == Tie {
				s.Gaps[i] = UnknownBoundary
				tb.r.Crossing++
			}
		}
	}

	tb.r.Sentences++
	tb.r.Tokens += n
	for _, g := range s.Gaps {
		switch g {
		case Tie:
			tb.r.Ties++
		case Break:
			tb.r.Breaks++
		default:
			tb.r.Unknown++
		}
	}
	for _, sg := range s.Segments {
		switch {
		case sg.Unknown():
			tb.r.UnknownSegments++
		case sg.Types != nil:
			tb.r.Segments[strings.Join(sg.Types, ",")]++
		}
	}
	return s
}

// typesOf is the type set of phrase key's segments: its type, the tied
// types of an ambiguous phrase, corpus.UnknownType for an untyped one, or
// nil where the options label the phrase O.
func (tb *TieBreaker) typesOf(key int) []string {
	switch l := tb.m.label[key]; l {
	case labelAmbiguous:
		if tb.m.cfg.policy(Ambiguous) == AsOutside {
			return nil
		}
		return slices.Clone(tb.m.ties[int32(key)])
	case labelUnknown:
		if tb.m.cfg.policy(Unknown) == AsOutside {
			return nil
		}
		return []string{corpus.UnknownType}
	default:
		return []string{tb.m.types[l]}
	}
}

// Report returns the counts of everything labeled so far.
func (tb *TieBreaker) Report() TieBreakReport {
	r := tb.r
	r.Segments = maps.Clone(r.Segments)
	r.Matcher = tb.m.stats
	r.Gazetteers = slices.Clone(tb.m.loads)
	return r
}

// TieBreak labels every sentence of c.
func (m *Matcher) TieBreak(c *corpus.Corpus) ([]TieBreakSentence, TieBreakReport) {
	tb := m.NewTieBreaker()
	tb.short = m.shortFormsOf(c)
	out := make([]TieBreakSentence, len(c.Sentences))
	for i, s := range c.Sentences {
		out[i] = tb.Label(s.Tokens)
	}
	return out, tb.Report()
}
