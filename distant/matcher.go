package distant

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"slices"
	"strings"
)

// keySep joins normalized tokens into a phrase key. It is a control
// character no tokenizer leaves inside a token.
const keySep = "\x1f"

// MatchKind says what a match asserts about its span.
type MatchKind uint8

const (
	// Typed: the span is an entity of Match.Type.
	Typed MatchKind = iota
	// Unknown: the span is entity-like but its type is unknown (an untyped
	// gazetteer phrase).
	Unknown
	// Ambiguous: the phrase has several types of equal rank.
	Ambiguous
)

func (k MatchKind) String() string {
	switch k {
	case Typed:
		return "typed"
	case Unknown:
		return "unknown"
	case Ambiguous:
		return "ambiguous"
	}
	return fmt.Sprintf("MatchKind(%d)", int(k))
}

// Match is one labeled phrase occurrence in a sentence: tokens [Start, End).
type Match struct {
	Start, End int
	Kind       MatchKind
	Type       string // the entity type when Kind is Typed
	Phrase     int    // the matched phrase, see Matcher.Phrase
}

// Phrase is a distinct normalized token sequence known to a Matcher, with
// its resolved label.
type Phrase struct {
	Text string // normalized tokens joined by spaces
	Kind MatchKind
	Type string // when Kind is Typed
	// Types lists the tied candidate types of an Ambiguous phrase.
	Types []string
}

// BuildStats describes a compiled Matcher.
type BuildStats struct {
	Entries         int `json:"entries"`          // gazetteer entries compiled
	StopwordPhrases int `json:"stopword_phrases"` // entries made only of stopwords, left out
	Phrases         int `json:"phrases"`          // distinct token sequences, case variants included
	Ambiguous       int `json:"ambiguous"`        // phrases with tied types
	Vocabulary      int `json:"vocabulary"`       // distinct tokens in all phrases
	Nodes           int `json:"nodes"`            // automaton states
	MaxTokens       int `json:"max_tokens"`       // longest phrase, in tokens
}

// Matcher finds gazetteer phrases in tokenized text. It is immutable after
// NewMatcher and safe for concurrent use; each goroutine scans with its own
// Scanner.
type Matcher struct {
	cfg   config
	norm  normalizer
	vocab *vocabTable
	ac    *automaton
	// Phrase data, indexed by key. The keys' texts are packed in one
	// string: a million small strings would cost more in headers than text.
	text    string
	textEnd []int32
	label   []int32 // >= 0: index into types; labelUnknown; labelAmbiguous
	ties    map[int32][]string
	types   []string
	stats   BuildStats
	loads   []LoadReport // of the gazetteers compiled, for reports
}

const (
	labelUnknown   = -1
	labelAmbiguous = -2
)

// candidate collects what the gazetteers say about one token sequence.
type candidate struct {
	rank  int64 // of the types below
	typ   string
	ties  []string // further types of the same rank
	typed bool
}

// offer records that an entry of the given type and rank names the phrase.
// A typed entry beats any untyped one: an untyped phrase only says "some
// entity", which a typed entry makes precise rather than contradicts.
func (c *candidate) offer(typ string, rank int64) {
	switch {
	case typ == "":
		return
	case !c.typed || rank > c.rank:
		*c = candidate{rank: rank, typ: typ, typed: true}
	case rank == c.rank && typ != c.typ && !slices.Contains(c.ties, typ):
		c.ties = append(c.ties, typ)
	}
}

// phraseTable gathers the distinct token sequences of all gazetteers, with
// what the gazetteers say about each, while NewMatcher reads them.
type phraseTable struct {
	keys    map[string]int32 // phrase key -> phrase
	ids     map[string]int32 // token -> id
	tokens  []string         // token by id
	cands   []candidate      // by phrase
	seqs    [][]int32        // token ids by phrase
	text    strings.Builder  // phrase keys, packed
	textEnd []int32
	longest int
}

// add records that a gazetteer entry names the phrase toks with typ at rank.
func (pt *phraseTable) add(toks []string, typ string, rank int64) {
	key := strings.Join(toks, keySep)
	k, ok := pt.keys[key]
	if !ok {
		k = int32(len(pt.cands))
		pt.keys[key] = k
		pt.cands = append(pt.cands, candidate{})
		seq := make([]int32, len(toks))
		for i, t := range toks {
			id, ok := pt.ids[t]
			if !ok {
				id = int32(len(pt.tokens))
				pt.ids[t] = id
				pt.tokens = append(pt.tokens, t)
			}
			seq[i] = id
		}
		pt.seqs = append(pt.seqs, seq)
		pt.text.WriteString(key)
		pt.textEnd = append(pt.textEnd, int32(pt.text.Len()))
		pt.longest = max(pt.longest, len(toks))
	}
	pt.cands[k].offer(typ, rank)
}

// NewMatcher compiles gazetteers into a Matcher. When gazetteers disagree on
// a phrase's type, the higher Gazetteer.Priority wins; within a priority, a
// phrase as written beats a case variant of another (CaseVariants); what
// still ties is Ambiguous.
func NewMatcher(gazetteers []*Gazetteer, opts ...Option) (*Matcher, error) {
	c := newConfig(opts)
	m := &Matcher{cfg: c, norm: c.normalizer(), ties: map[int32][]string{}}
	pt := &phraseTable{keys: map[string]int32{}, ids: map[string]int32{}}
	var normed []string
	for _, g := range gazetteers {
		m.loads = append(m.loads, g.Report)
		for _, e := range g.Entries {
			normed = normed[:0]
			for _, t := range e.Tokens {
				if n := m.norm.token(t); n != "" {
					normed = append(normed, n)
				}
			}
			if len(normed) == 0 {
				continue // Load reports these; a hand-built Gazetteer may still hold one
			}
			m.stats.Entries++
			if c.isStopPhrase(normed) {
				m.stats.StopwordPhrases++
				continue
			}
			for i, variant := range m.variants(normed) {
				rank := int64(g.Priority) * 2
				if i == 0 {
					rank++ // the phrase as written
				}
				pt.add(variant, e.Type, rank)
			}
		}
	}
	if pt.text.Len() > 1<<31-1 {
		return nil, fmt.Errorf("distant: %d bytes of phrases exceed the matcher's capacity", pt.text.Len())
	}
	m.text, m.textEnd = pt.text.String(), pt.textEnd

	b := newACBuilder(len(pt.tokens))
	for k, seq := range pt.seqs {
		b.insert(seq, int32(k))
	}
	m.ac = b.build()
	m.vocab = newVocabTable(pt.tokens, m.ac.rootNext)
	m.resolve(pt.cands)
	m.stats.Phrases = len(pt.cands)
	m.stats.Vocabulary = len(pt.tokens)
	m.stats.Nodes = m.ac.size()
	m.stats.MaxTokens = pt.longest
	return m, nil
}

// resolve settles each phrase's label from its candidate types.
func (m *Matcher) resolve(cands []candidate) {
	typeIndex := map[string]int32{}
	m.label = make([]int32, len(cands))
	for k, cd := range cands {
		switch {
		case !cd.typed:
			m.label[k] = labelUnknown
		case len(cd.ties) > 0:
			m.label[k] = labelAmbiguous
			tied := append([]string{cd.typ}, cd.ties...)
			slices.Sort(tied)
			m.ties[int32(k)] = tied
			m.stats.Ambiguous++
		default:
			i, ok := typeIndex[cd.typ]
			if !ok {
				i = int32(len(m.types))
				typeIndex[cd.typ] = i
				m.types = append(m.types, cd.typ)
			}
			m.label[k] = i
		}
	}
}

// variants returns the token sequences under which a normalized phrase is
// matched; the first is the phrase as written.
func (m *Matcher) variants(toks []string) [][]string {
	out := [][]string{slices.Clone(toks)}
	if m.cfg.caseMode != CaseVariants {
		return out
	}
	add := func(f func(string) string) {
		v := make([]string, len(toks))
		for i, t := range toks {
			v[i] = f(t)
		}
		for _, o := range out {
			if slices.Equal(o, v) {
				return
			}
		}
		out = append(out, v)
	}
	add(strings.ToUpper)
	if !m.cfg.hasStopword(toks) {
		add(strings.ToLower)
	}
	return out
}

// key returns phrase i's key: its normalized tokens joined by keySep.
func (m *Matcher) key(i int) string {
	start := int32(0)
	if i > 0 {
		start = m.textEnd[i-1]
	}
	return m.text[start:m.textEnd[i]]
}

// Stats describes the compiled gazetteers.
func (m *Matcher) Stats() BuildStats { return m.stats }

// Types returns the entity types the matcher can label, sorted.
func (m *Matcher) Types() []string {
	t := slices.Clone(m.types)
	slices.Sort(t)
	return t
}

// NumPhrases returns the number of distinct phrases; Phrase takes 0..NumPhrases-1.
func (m *Matcher) NumPhrases() int { return len(m.label) }

// Phrase describes phrase i of a Match.
func (m *Matcher) Phrase(i int) Phrase {
	p := Phrase{Text: strings.ReplaceAll(m.key(i), keySep, " ")}
	switch l := m.label[i]; l {
	case labelUnknown:
		p.Kind = Unknown
	case labelAmbiguous:
		p.Kind = Ambiguous
		p.Types = slices.Clone(m.ties[int32(i)])
	default:
		p.Kind, p.Type = Typed, m.types[l]
	}
	return p
}

// Scanner matches sentences one at a time, reusing its buffers. It is not
// safe for concurrent use; make one per goroutine.
type Scanner struct {
	m     *Matcher
	toks  []tokenRef
	raw   []rawMatch
	taken []bool
	out   []Match
	cache tokenCache
}

// Scanner returns a new Scanner over m.
func (m *Matcher) Scanner() *Scanner {
	return &Scanner{m: m, cache: tokenCache{seed: maphash.MakeSeed()}}
}

// cacheSize is the number of tokens a Scanner remembers (a power of two):
// 16k slots of 24 bytes stay within a core's L2 cache.
const cacheSize = 1 << 14

// tokenCache remembers how recent corpus tokens were looked up. Word
// frequencies follow Zipf's law, so a few thousand slots answer most
// lookups from memory that stays in the CPU cache, where the vocabulary map
// of a large gazetteer costs a cache miss or two per token. It is keyed by
// the token as written, so a hit also skips normalization. (On BC5CDR's raw
// text, 87% of lookups hit with 8k slots; on CoNLL-2003's, 79%.)
type tokenCache struct {
	seed  maphash.Seed
	slots [cacheSize]cacheSlot
}

// cacheSlot holds a token and its lookup; an empty slot holds "", which is
// never looked up through the cache.
type cacheSlot struct {
	tok string
	ref tokenRef
}

// lookup returns the automaton's view of a corpus token.
func (s *Scanner) lookup(tok string) tokenRef {
	if tok == "" {
		return s.m.find(tok)
	}
	slot := &s.cache.slots[maphash.String(s.cache.seed, tok)&(cacheSize-1)]
	if slot.tok == tok {
		return slot.ref
	}
	ref := s.m.find(tok)
	*slot = cacheSlot{tok: tok, ref: ref}
	return ref
}

// find looks a corpus token up in the vocabulary.
func (m *Matcher) find(tok string) tokenRef {
	return m.vocab.lookup(m.norm.token(tok))
}

// Match returns the phrase occurrences in a sentence, ordered by position.
// Overlaps are resolved longest first: a longer match wins over every
// shorter one it overlaps, and among equally long ones the leftmost wins.
// The result is valid until the next call.
func (s *Scanner) Match(tokens []string) []Match {
	s.toks = s.toks[:0]
	for _, t := range tokens {
		s.toks = append(s.toks, s.lookup(t))
	}
	s.raw = s.m.ac.scan(s.raw[:0], s.toks)
	return s.resolve(len(tokens))
}

// resolve turns the occurrences in s.raw into non-overlapping matches.
func (s *Scanner) resolve(n int) []Match {
	s.out = s.out[:0]
	if len(s.raw) == 0 {
		return s.out
	}
	slices.SortFunc(s.raw, func(a, b rawMatch) int {
		if c := cmp.Compare(b.end-b.start, a.end-a.start); c != 0 {
			return c
		}
		return cmp.Compare(a.start, b.start)
	})
	if cap(s.taken) < n {
		s.taken = make([]bool, n)
	}
	s.taken = s.taken[:n]
	clear(s.taken)
	for _, r := range s.raw {
		if slices.Contains(s.taken[r.start:r.end], true) {
			continue
		}
		for i := r.start; i < r.end; i++ {
			s.taken[i] = true
		}
		mt := Match{Start: int(r.start), End: int(r.end), Phrase: int(r.key)}
		switch l := s.m.label[r.key]; l {
		case labelUnknown:
			mt.Kind = Unknown
		case labelAmbiguous:
			mt.Kind = Ambiguous
		default:
			mt.Kind, mt.Type = Typed, s.m.types[l]
		}
		s.out = append(s.out, mt)
	}
	slices.SortFunc(s.out, func(a, b Match) int { return cmp.Compare(a.Start, b.Start) })
	return s.out
}
