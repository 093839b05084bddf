package corpus

import (
	"cmp"
	"fmt"
	"slices"
)

// Span is an entity mention: tokens [Start, End) of a sentence, of type Label.
type Span struct {
	Start int    `json:"start"`
	End   int    `json:"end"`
	Label string `json:"label"`
}

func (s Span) String() string { return fmt.Sprintf("%s[%d,%d)", s.Label, s.Start, s.End) }

// Spans extracts the entity spans of a tag sequence with the chunking rules
// of the CoNLL evaluation script conlleval (in its version that knows E- and
// S- tags), whatever the scheme, so that malformed sequences are read the way
// every published NER score reads them:
//
//   - B-X and S-X always start an entity;
//   - I-X and E-X start one after O, after an E- or S- tag, or after a tag of
//     another type (so I-PER after O or after I-LOC is a new entity);
//   - an entity ends before O, B-, S- or a change of type, and after E- or S-.
//
// The scheme only decides which prefixes are allowed: an E- tag in BIO input
// is an ErrUnknownTag error, reported with the tag's 1-based index.
func (s Scheme) Spans(tags []string) ([]Span, error) {
	var spans []Span
	prev := Tag{Prefix: 'O'}
	open := -1 // start of the entity being read, -1 outside
	for i, raw := range tags {
		cur, err := s.ParseTag(raw)
		if err != nil {
			return nil, fmt.Errorf("tag %d: %w", i+1, err)
		}
		if open >= 0 && chunkEnds(prev, cur) {
			spans = append(spans, Span{Start: open, End: i, Label: prev.Type})
			open = -1
		}
		// conlleval's startOfChunk needs no separate test: wherever it
		// holds after a tag inside an entity, endOfChunk holds too, so a
		// non-O tag starts an entity exactly when none is open here.
		if cur.Prefix != 'O' && open < 0 {
			open = i
		}
		prev = cur
	}
	if open >= 0 {
		spans = append(spans, Span{Start: open, End: len(tags), Label: prev.Type})
	}
	return spans, nil
}

// chunkEnds reports whether the entity holding prev ends before cur
// (conlleval's endOfChunk for a prev inside an entity).
func chunkEnds(prev, cur Tag) bool {
	switch {
	case prev.Prefix == 'E' || prev.Prefix == 'S':
		return true
	case cur.Prefix == 'O' || cur.Prefix == 'B' || cur.Prefix == 'S':
		return true
	}
	return prev.Type != cur.Type
}

// ConvertOption adjusts Tags and Convert.
type ConvertOption func(*convertConfig)

type convertConfig struct{ mergeAdjacent bool }

// MergeAdjacent accepts that the IO scheme merges adjacent entities of the
// same type into one (the boundary between them cannot be written). Without
// it, writing such spans in IO fails with ErrBoundaryLost.
func MergeAdjacent() ConvertOption { return func(c *convertConfig) { c.mergeAdjacent = true } }

// Tags writes spans as n tags in the scheme. Spans may come in any order but
// must lie within [0, n), be non-empty and not overlap. AnyScheme cannot be
// written: pick one.
func (s Scheme) Tags(spans []Span, n int, opts ...ConvertOption) ([]string, error) {
	var cfg convertConfig
	for _, o := range opts {
		o(&cfg)
	}
	if s == AnyScheme || s > BIOES {
		return nil, fmt.Errorf("cannot write tags in scheme %s: choose io, bio, iob1 or bioes", s)
	}
	sorted := slices.SortedFunc(slices.Values(spans), func(a, b Span) int { return cmp.Compare(a.Start, b.Start) })
	tags := make([]string, n)
	for i := range tags {
		tags[i] = Outside
	}
	prevEnd, prevLabel := -1, ""
	for _, sp := range sorted {
		if sp.Start < 0 || sp.End > n || sp.Start >= sp.End {
			return nil, problem(ErrSyntax, "span %v out of range for %d tokens", sp, n)
		}
		if err := checkLabel(sp.Label); err != nil {
			return nil, problem(ErrSyntax, "span %v: %v", sp, err)
		}
		if sp.Start < prevEnd {
			return nil, problem(ErrSyntax, "span %v overlaps the span ending at %d", sp, prevEnd)
		}
		adjacentSame := sp.Start == prevEnd && sp.Label == prevLabel
		if adjacentSame && s == IO && !cfg.mergeAdjacent {
			return nil, fmt.Errorf("%s span ending at %d and %v: %w", prevLabel, prevEnd, sp, ErrBoundaryLost)
		}
		for i := sp.Start; i < sp.End; i++ {
			tags[i] = "I-" + sp.Label
		}
		switch s {
		case BIO:
			tags[sp.Start] = "B-" + sp.Label
		case IOB1:
			if adjacentSame {
				tags[sp.Start] = "B-" + sp.Label
			}
		case BIOES:
			if sp.End-sp.Start == 1 {
				tags[sp.Start] = "S-" + sp.Label
			} else {
				tags[sp.Start] = "B-" + sp.Label
				tags[sp.End-1] = "E-" + sp.Label
			}
		}
		prevEnd, prevLabel = sp.End, sp.Label
	}
	return tags, nil
}

// Convert rewrites tags from one scheme to another through their spans (read
// with conlleval's rules, so malformed input comes out well-formed).
// Conversions among BIO, IOB1 and BIOES are lossless; converting to IO fails
// with ErrBoundaryLost where two entities of the same type touch, unless
// MergeAdjacent is given.
func Convert(tags []string, from, to Scheme, opts ...ConvertOption) ([]string, error) {
	spans, err := from.Spans(tags)
	if err != nil {
		return nil, err
	}
	return to.Tags(spans, len(tags), opts...)
}

// Convert rewrites every sentence's tags from one scheme to another (see the
// function Convert); the error names the 1-based sentence. Unlabeled
// sentences are left alone. On error the corpus is unchanged.
func (c *Corpus) Convert(from, to Scheme, opts ...ConvertOption) error {
	out := make([][]string, len(c.Sentences))
	for i, s := range c.Sentences {
		if s.Tags == nil {
			continue
		}
		tags, err := Convert(s.Tags, from, to, opts...)
		if err != nil {
			return fmt.Errorf("sentence %d: %w", i+1, err)
		}
		out[i] = tags
	}
	for i := range c.Sentences {
		if out[i] != nil {
			c.Sentences[i].Tags = out[i]
		}
	}
	return nil
}
