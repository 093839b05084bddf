package distant

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/eval"
)

// Labeler writes distant labels sentence by sentence and accumulates the
// Report, so that a corpus can be labeled while it streams. It is not safe
// for concurrent use.
type Labeler struct {
	m      *Matcher
	scheme corpus.Scheme
	sc     *Scanner
	spans  []corpus.Span

	sentences, tokens, matched int
	typedTokens, unknownTokens int
	ioMerges                   int
	matches                    map[string]int
	unknown, ambiguous         int
	phraseCount                map[int]int

	// short types the abbreviations the corpus defines (nil: off);
	// shortLabeled counts the occurrences it labeled, by short form.
	short        *shortForms
	shortLabeled map[string]int
	// caps finds the capitalized phrases (nil: off); capsLabeled counts
	// the occurrences it labeled, by phrase, capsLonger those that are
	// longer names holding matches.
	caps        *capitalizedPhrases
	capsShare   capitalShare
	capsLabeled map[string]int
	capsLonger  int
	capsTyped   map[string]int

	gold       *eval.Scorer
	goldMarks  int // unknown or ambiguous spans on gold sentences
	goldExact  int // ... that have exactly the boundaries of a gold entity
	goldSource string
}

// NewLabeler returns a Labeler that writes tags in scheme (IO, BIO, IOB1 or
// BIOES). In IO, adjacent matches of one type merge into one entity, as the
// scheme cannot separate them; the report counts such merges.
func (m *Matcher) NewLabeler(scheme corpus.Scheme) (*Labeler, error) {
	if _, err := scheme.Tags(nil, 0); err != nil {
		return nil, fmt.Errorf("distant: %w", err)
	}
	return &Labeler{
		m:           m,
		scheme:      scheme,
		sc:          m.Scanner(),
		matches:     map[string]int{},
		phraseCount: map[int]int{},
	}, nil
}

// spansOf turns matches into spans: typed matches keep their type, and the
// others get corpus.UnknownType or are left out, as configured (always left
// out without keepUnknown).
func (l *Labeler) spansOf(ms []Match, keepUnknown bool) []corpus.Span {
	l.spans = l.spans[:0]
	for _, mt := range ms {
		label := mt.Type
		if mt.Kind != Typed {
			if !keepUnknown || l.m.cfg.policy(mt.Kind) == AsOutside {
				continue
			}
			label = corpus.UnknownType
		}
		l.spans = append(l.spans, corpus.Span{Start: mt.Start, End: mt.End, Label: label})
	}
	return l.spans
}

func (l *Labeler) tags(spans []corpus.Span, n int) ([]string, error) {
	return l.scheme.Tags(spans, n, corpus.MergeAdjacent())
}

// match returns the matches of a sentence, the short forms' included.
func (l *Labeler) match(tokens []string) []Match {
	ms := l.sc.Match(tokens)
	if l.short != nil {
		ms = l.short.add(tokens, ms)
	}
	if l.caps != nil {
		ms = l.caps.add(tokens, ms) // last: between every other match
	}
	return ms
}

// Label returns the distant tags of a sentence and counts them in the report.
func (l *Labeler) Label(tokens []string) ([]string, error) {
	ms := l.match(tokens)
	spans := l.spansOf(ms, true)
	tags, err := l.tags(spans, len(tokens))
	if err != nil {
		return nil, fmt.Errorf("distant: %w", err) // not reached: matches never overlap
	}
	l.sentences++
	l.tokens += len(tokens)
	if len(ms) > 0 {
		l.matched++
	}
	for _, mt := range ms {
		switch mt.Phrase {
		case phraseCapitalized, phraseLonger:
			l.capsLabeled[strings.Join(tokens[mt.Start:mt.End], " ")]++
			if mt.Phrase == phraseLonger {
				l.capsLonger++
			}
			if mt.Kind == Typed {
				l.capsTyped[mt.Type]++
				l.typedTokens += mt.End - mt.Start
				continue // not a gazetteer's match
			}
		case phraseShortForm:
			l.shortLabeled[strings.Join(tokens[mt.Start:mt.End], " ")]++
		default:
			l.phraseCount[mt.Phrase]++
		}
		switch mt.Kind {
		case Typed:
			l.matches[mt.Type]++
			l.typedTokens += mt.End - mt.Start
		case Unknown:
			if mt.Phrase != phraseCapitalized && mt.Phrase != phraseLonger { // counted in capsLabeled
				l.unknown++
			}
		case Ambiguous:
			l.ambiguous++
		}
		if mt.Kind != Typed && l.m.cfg.policy(mt.Kind) == AsUnknown {
			l.unknownTokens += mt.End - mt.Start
		}
	}
	if l.scheme == corpus.IO {
		for i := 1; i < len(spans); i++ {
			if spans[i].Start == spans[i-1].End && spans[i].Label == spans[i-1].Label {
				l.ioMerges++
			}
		}
	}
	return tags, nil
}

// Score labels a gold sentence and scores its distant tags against the
// gold tags (conlleval semantics, gold tags in any scheme). Spans of unknown
// type count as O: they predict no type. Gold sentences are scored apart from
// the corpus statistics, so they may be a separate, held-out set.
func (l *Labeler) Score(gold corpus.Sentence) error {
	if gold.Tags == nil {
		return fmt.Errorf("gold sentence has no tags")
	}
	if len(gold.Tags) != len(gold.Tokens) {
		return fmt.Errorf("gold sentence has %d tokens but %d tags", len(gold.Tokens), len(gold.Tags))
	}
	if l.gold == nil {
		l.gold = eval.NewScorer(corpus.BIO)
	}
	// Both sides are rewritten in BIO, so that token accuracy compares like
	// with like whatever the schemes; entities are read from the tags as
	// written (IO labels keep their merged entities).
	goldSpans, err := corpus.AnyScheme.Spans(gold.Tags)
	if err != nil {
		return fmt.Errorf("gold %w", err)
	}
	goldBIO, err := corpus.BIO.Tags(goldSpans, len(gold.Tags))
	if err != nil {
		return fmt.Errorf("gold %w", err) // not reached: Spans yields valid spans
	}
	ms := l.match(gold.Tokens)
	written, err := l.tags(l.spansOf(ms, false), len(gold.Tokens))
	if err != nil {
		return fmt.Errorf("distant: %w", err)
	}
	pred, err := corpus.Convert(written, l.scheme, corpus.BIO)
	if err != nil {
		return fmt.Errorf("distant: %w", err) // not reached: we wrote them
	}
	if err := l.gold.Add(goldBIO, pred); err != nil {
		return err
	}
	for _, sp := range l.spansOf(ms, true) {
		if sp.Label != corpus.UnknownType {
			continue
		}
		l.goldMarks++
		if slices.ContainsFunc(goldSpans, func(g corpus.Span) bool { return g.Start == sp.Start && g.End == sp.End }) {
			l.goldExact++
		}
	}
	return nil
}

// SetGoldSource names the gold data in the report.
func (l *Labeler) SetGoldSource(name string) { l.goldSource = name }

// Report returns the statistics of everything labeled and scored so far.
func (l *Labeler) Report() Report {
	m := l.m
	r := Report{
		Scheme:             l.scheme.String(),
		Case:               m.cfg.caseMode.String(),
		UnicodeForm:        m.cfg.form.String(),
		AmbiguousAs:        m.cfg.ambiguous.String(),
		UntypedAs:          m.cfg.untyped.String(),
		Sentences:          l.sentences,
		Tokens:             l.tokens,
		SentencesWithMatch: l.matched,
		Matches:            maps.Clone(l.matches),
		UnknownMatches:     l.unknown,
		AmbiguousMatches:   l.ambiguous,
		TypedTokens:        l.typedTokens,
		UnknownTokens:      l.unknownTokens,
		IOMerges:           l.ioMerges,
		Matcher:            m.stats,
		Gazetteers:         slices.Clone(m.loads),
	}
	if l.tokens > 0 {
		r.Coverage = float64(l.typedTokens) / float64(l.tokens)
		r.UnknownCoverage = float64(l.unknownTokens) / float64(l.tokens)
	}
	if l.sentences > 0 {
		r.SentenceCoverage = float64(l.matched) / float64(l.sentences)
	}

	type counted struct{ phrase, n int }
	var all []counted
	for p, n := range l.phraseCount {
		all = append(all, counted{p, n})
	}
	slices.SortFunc(all, func(a, b counted) int {
		return cmp.Or(cmp.Compare(b.n, a.n), cmp.Compare(m.key(a.phrase), m.key(b.phrase)))
	})
	for _, c := range all {
		p := m.Phrase(c.phrase)
		pc := PhraseCount{Phrase: p.Text, Kind: p.Kind.String(), Type: p.Type, Types: p.Types, Count: c.n}
		if len(r.TopPhrases) < m.cfg.topK {
			r.TopPhrases = append(r.TopPhrases, pc)
		}
		if p.Kind == Ambiguous && len(r.AmbiguousPhrases) < m.cfg.topK {
			r.AmbiguousPhrases = append(r.AmbiguousPhrases, pc)
		}
	}
	if l.short != nil {
		r.Abbreviations = l.short.report(l.shortLabeled, m.cfg.topK)
	}
	if cfg := m.cfg.capitalized; cfg != nil {
		r.Capitalized = capitalizedReport(l.capsLabeled, l.capsLonger, l.capsTyped, m.cfg.topK).withShare(l.capsShare, cfg.MinShare)
	}
	if l.gold != nil {
		r.Gold = &GoldReport{
			Source:       l.goldSource,
			Report:       l.gold.Report(),
			UnknownSpans: l.goldMarks,
			UnknownExact: l.goldExact,
		}
	}
	return r
}

// Label labels every sentence of c and returns the labeled copy (tokens
// shared with c, tags new, any earlier tags replaced) with its report.
func Label(m *Matcher, c *corpus.Corpus, scheme corpus.Scheme) (*corpus.Corpus, Report, error) {
	return labelAndScore(m, c, nil, scheme)
}

// labelAndScore labels c and, when gold is not nil, scores gold.
func labelAndScore(m *Matcher, c, gold *corpus.Corpus, scheme corpus.Scheme) (*corpus.Corpus, Report, error) {
	l, err := m.NewLabeler(scheme)
	if err != nil {
		return nil, Report{}, err
	}
	// Before labeling: an abbreviation is typed wherever it occurs, also
	// before its definition.
	l.short, l.shortLabeled = m.shortFormsOf(c), map[string]int{}
	l.caps, l.capsShare = m.capitalizedOf(c)
	l.capsLabeled, l.capsTyped = map[string]int{}, map[string]int{}
	sentences, err := corpus.MapSentences(c, func(s corpus.Sentence) (corpus.Sentence, error) {
		tags, err := l.Label(s.Tokens)
		return corpus.Sentence{Tokens: s.Tokens, Tags: tags, DocStart: s.DocStart}, err
	})
	if err != nil {
		return nil, Report{}, err
	}
	out := &corpus.Corpus{Sentences: sentences}
	if gold != nil {
		for i, s := range gold.Sentences {
			if err := l.Score(s); err != nil {
				return nil, Report{}, fmt.Errorf("gold sentence %d: %w", i+1, err)
			}
		}
	}
	return out, l.Report(), nil
}
