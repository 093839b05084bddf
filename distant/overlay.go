package distant

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/train/overlay"
)

// OverlayKind is the kind of the gazetteer's overlay in a checkpoint
// (package overlay): a tagger saved with it combines the gazetteer's
// typed matches of a sentence with its own entities.
const OverlayKind = "gazetteer"

// Files of the gazetteer's overlay, in the checkpoint's overlay.Dir.
const (
	overlaySettingsFile = "gazetteer.json"
	overlayEntriesFile  = "entries.jsonl"
)

func init() { overlay.Register(OverlayKind, LoadOverlay) }

// overlaySettings are the matching options a saved overlay compiles its
// matcher with: those of NewMatcher that change which phrases match. The
// tokenizer is not among them (the entries are saved tokenized), nor how
// untyped and ambiguous matches are labeled (the overlay adds typed
// matches only; the others still keep shorter matches out of them).
type overlaySettings struct {
	Case      string   `json:"case"`
	Unicode   string   `json:"unicode"`
	Stopwords []string `json:"stopwords,omitempty"`
	// Sources name the gazetteers the entries came from, for a reader.
	Sources []string `json:"sources,omitempty"`
	Entries int      `json:"entries"`
	// Names, when set, finds person names in each sentence as well (see
	// WithNames).
	Names *overlayNames `json:"names,omitempty"`
}

// overlayNames is what the overlay finds person names with: the name
// lists and the common words of the text the tagger was trained on.
type overlayNames struct {
	First     []string `json:"first"`
	Titles    []string `json:"titles"`
	Common    []string `json:"common"`
	MinCommon int      `json:"min_common"`
	// Otherwise: NameLists.Otherwise (absent in overlays saved before
	// surnames were found: every surname then counts).
	Otherwise []string `json:"otherwise,omitempty"`
	// Nameless: NameLists.Common, the capitalized words that name nothing
	// (days, months), which capitalized phrases leave out (Admit).
	Nameless []string `json:"nameless,omitempty"`
	// Heads: NameLists.Heads, which end a person's name where not PER.
	Heads map[string]string `json:"heads,omitempty"`
}

// overlayEntry is one line of overlayEntriesFile: a gazetteer entry as
// its loader tokenized it (the matcher normalizes it as distant.label's
// does), its type ("" untyped) and its gazetteer's priority.
type overlayEntry struct {
	Tokens   []string `json:"tokens"`
	Type     string   `json:"type,omitempty"`
	Priority int      `json:"priority,omitempty"`
}

// GazetteerOverlay is the overlay of gazetteers: a sentence's entities are
// the typed matches distant.label would label in it with the same
// gazetteers and options. It is safe for concurrent use.
type GazetteerOverlay struct {
	m        *Matcher
	settings overlaySettings
	entries  []overlayEntry
	scanners sync.Pool
	opts     []Option    // m's options, for ForText's names
	names    *nameFinder // nil: the gazetteers' matches alone
	// textNames matches the names ForText found in the whole text, in
	// place of names (which finds them in one sentence).
	textNames *Matcher
	textScans sync.Pool
	// caps finds the capitalized phrases of a sentence between the
	// overlay's entities (Admit), with the training text's common words,
	// and those of the text ForText was given; nil without name lists.
	caps *capitalizedPhrases
}

// NewOverlay compiles gazetteers into an overlay with the matching options
// of distant.label (case, Unicode form, stopwords, priorities).
func NewOverlay(gazetteers []*Gazetteer, opts ...Option) (*GazetteerOverlay, error) {
	m, err := NewMatcher(gazetteers, opts...)
	if err != nil {
		return nil, err
	}
	s := overlaySettings{Case: m.cfg.caseMode.String(), Unicode: m.cfg.form.String(), Stopwords: slices.Sorted(maps.Keys(m.cfg.stopwords))}
	var entries []overlayEntry
	for _, g := range gazetteers {
		s.Sources = append(s.Sources, g.Name)
		for _, e := range g.Entries {
			entries = append(entries, overlayEntry{Tokens: e.Tokens, Type: e.Type, Priority: g.Priority})
		}
	}
	s.Entries = len(entries)
	return newGazetteerOverlay(m, s, entries, opts), nil
}

func newGazetteerOverlay(m *Matcher, s overlaySettings, entries []overlayEntry, opts []Option) *GazetteerOverlay {
	o := &GazetteerOverlay{m: m, settings: s, entries: entries, opts: opts}
	o.scanners.New = func() any { return m.Scanner() }
	return o
}

// WithNames makes the overlay also find person names in each sentence it
// is given, as distant.names finds them in a corpus (lists: first names
// that a typed gazetteer lists as another type already dropped), so that
// names the training text never held are found where the tagger predicts.
// common are the common lower-case words of the training text: one
// sentence cannot tell that Will is a word, the text the tagger learned
// from can. A name and an overlapping gazetteer match resolve as
// distant.label resolves them: the longer is kept, the match on a tie.
func (o *GazetteerOverlay) WithNames(lists NameLists, common []string, minCommon int) {
	o.names = newNameFinder(lists, common)
	o.settings.Names = &overlayNames{First: slices.Sorted(maps.Keys(lists.First)), Titles: slices.Sorted(maps.Keys(lists.Titles)),
		Common: common, MinCommon: minCommon, Otherwise: slices.Sorted(maps.Keys(lists.Otherwise)), Nameless: slices.Sorted(maps.Keys(lists.Common)), Heads: lists.Heads}
	// The name finder's set of the training text's common words serves
	// the phrases too.
	o.caps = &capitalizedPhrases{nameless: namelessWords(lists.Nameless(), o.m.cfg.stopwords), common: o.names.common, minCommon: minCommon}
}

// Admit keeps of a sentence's model entities (ordered, not overlapping)
// those that look like a name the overlay's entities own leave out: each
// exactly a capitalized phrase of the sentence between them, as the
// capitalized phrases of distant.label are found, or holding a word that is
// not capitalized ("Battle of New Orleans"), which no phrase can. The model
// of a sample trained on those phrases also tags a part of a longer name
// ("Morris" of "Morris County"), a day ("Monday") or a word the text writes
// in lower case ("County"): on the sample's dev split 29 of the 52
// entities it added to the gazetteer's were wrong, and the gate drops 18 of
// those and 3 of the right ones. A model entity that is exactly a longer
// name holding some of own (a phrase of phraseLonger) takes their place:
// it returns own less those.
// Without name lists every entity is admitted and own is kept.
func (o *GazetteerOverlay) Admit(tokens []string, own, model []corpus.Span) (admitted, kept []corpus.Span) {
	if o.caps == nil || len(model) == 0 {
		return model, own
	}
	phrases := o.caps.phrases(tokens, own)
	var longer []Match // the longer names the model found exactly
	for _, e := range model {
		k := slices.IndexFunc(phrases, func(p Match) bool { return p.Start == e.Start && p.End == e.End })
		if k >= 0 || slices.ContainsFunc(tokens[e.Start:e.End], func(t string) bool { return !isCapitalized(t) }) {
			admitted = append(admitted, e)
		}
		if k >= 0 && phrases[k].Phrase == phraseLonger {
			longer = append(longer, phrases[k])
		}
	}
	if longer == nil {
		return admitted, own
	}
	return admitted, slices.DeleteFunc(slices.Clone(own), func(sp corpus.Span) bool { return heldBy(longer, sp.Start, sp.End) })
}

// ForText returns, for an overlay with name lists, the overlay for the
// sentences a tagger predicts together: the person names found in them as
// MineNames finds them in a corpus (a word common in them or in the
// training text starts no name), matched wherever they occur and resolved
// against the gazetteers' matches as Spans resolves a sentence's names
// (the longer kept, the match on a tie). So a surname alone is found where the text
// names the person in full elsewhere, as `nerflow distant --names` labels
// a corpus. Without name lists it is the overlay itself.
func (o *GazetteerOverlay) ForText(sentences [][]string) (overlay.Overlay, error) {
	if o.names == nil {
		return o, nil
	}
	text := &corpus.Corpus{Sentences: make([]corpus.Sentence, len(sentences))}
	for i, toks := range sentences {
		text.Sentences[i].Tokens = toks
	}
	// The text's own common words end names and keep first names out, as
	// in MineNames; the training text's also keep first names out (one
	// request's sentences cannot tell that Will is a word). Ending names
	// at the capitalized form of every common training word too cost the
	// sample's dev split 2.4 PER F1 of the overlay alone (83.7 against
	// 86.1): a surname that is also a word of the training text.
	f := newTextFinder(o.names.lists, text, o.settings.Names.MinCommon)
	for _, w := range o.settings.Names.Common {
		f.common[w] = true
	}
	mined := f.mine(text)
	// The text's lower-case words, as the labels' phrases count their
	// corpus's, beside the common words of the text and the training
	// text, which the name finder has gathered already: no map is copied
	// for a request.
	caps := &capitalizedPhrases{nameless: o.caps.nameless, lower: f.lower, common: f.common, minCommon: o.caps.minCommon}
	if len(mined.Phrases) == 0 {
		t := newGazetteerOverlay(o.m, o.settings, o.entries, o.opts)
		t.names, t.caps = o.names, caps
		return t, nil
	}
	g, err := mined.Gazetteer("names of the text", o.opts...)
	if err != nil {
		return nil, err
	}
	// Only the text's names are compiled here: the gazetteers' matcher is
	// shared, not rebuilt for every request a served tagger answers.
	names, err := NewMatcher([]*Gazetteer{g}, o.opts...)
	if err != nil {
		return nil, err
	}
	t := newGazetteerOverlay(o.m, o.settings, o.entries, o.opts)
	t.textNames, t.caps = names, caps
	t.textScans.New = func() any { return names.Scanner() }
	return t, nil
}

// Kind is OverlayKind.
func (o *GazetteerOverlay) Kind() string { return OverlayKind }

// Types returns the entity types the overlay can add, sorted.
func (o *GazetteerOverlay) Types() []string { return o.m.Types() }

// Stats describes the compiled gazetteers.
func (o *GazetteerOverlay) Stats() BuildStats { return o.m.Stats() }

// Spans returns the typed matches of a sentence: distant.label's
// entities of it. Untyped and ambiguous matches name no type to add.
func (o *GazetteerOverlay) Spans(tokens []string) []corpus.Span {
	sc := o.scanners.Get().(*Scanner)
	defer o.scanners.Put(sc)
	matches := sc.Match(tokens)
	var found []corpus.Span
	switch {
	case o.textNames != nil:
		ts := o.textScans.Get().(*Scanner)
		for _, mt := range ts.Match(tokens) {
			found = append(found, corpus.Span{Start: mt.Start, End: mt.End, Label: personType})
		}
		o.textScans.Put(ts)
	case o.names != nil:
		found = o.names.find(tokens, nil)
	}
	var names []corpus.Span
	for _, n := range found {
		if longerThanMatches(matches, n) {
			names = append(names, n)
		}
	}
	out := names
	for _, mt := range matches {
		if mt.Kind == Typed && !slices.ContainsFunc(names, func(n corpus.Span) bool { return n.Start < mt.End && mt.Start < n.End }) {
			out = append(out, corpus.Span{Start: mt.Start, End: mt.End, Label: mt.Type})
		}
	}
	slices.SortFunc(out, func(a, b corpus.Span) int { return cmp.Compare(a.Start, b.Start) })
	return out
}

// longerThanMatches reports whether name n is longer than every match it
// overlaps (of any kind: an untyped or ambiguous match keeps a shorter
// phrase out, as in distant.label); such a name replaces them.
func longerThanMatches(matches []Match, n corpus.Span) bool {
	for _, mt := range matches {
		if mt.Start < n.End && n.Start < mt.End && mt.End-mt.Start >= n.End-n.Start {
			return false
		}
	}
	return true
}

// Save writes the settings and the entries into dir.
func (o *GazetteerOverlay) Save(dir string) error {
	b, err := json.MarshalIndent(o.settings, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, overlaySettingsFile), append(b, '\n'), 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, overlayEntriesFile))
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, e := range o.entries {
		if err := enc.Encode(e); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// readJSONFile decodes the JSON file path into v; a malformed file is an
// error naming it.
func readJSONFile(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// LoadOverlay reads a gazetteer overlay saved in dir (the Loader package
// overlay calls for OverlayKind). Malformed files are errors naming the
// file and line.
func LoadOverlay(dir string) (overlay.Overlay, error) {
	sp := filepath.Join(dir, overlaySettingsFile)
	var s overlaySettings
	if err := readJSONFile(sp, &s); err != nil {
		return nil, err
	}
	cm, err := ParseCaseMode(s.Case)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sp, err)
	}
	uf, err := ParseUnicodeForm(s.Unicode)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sp, err)
	}
	ep := filepath.Join(dir, overlayEntriesFile)
	f, err := os.Open(ep)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var entries []overlayEntry
	byPriority := map[int]*Gazetteer{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), maxLine)
	line := 0
	for sc.Scan() {
		line++
		var e overlayEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", ep, line, err)
		}
		if len(e.Tokens) == 0 {
			return nil, fmt.Errorf("%s:%d: an entry without tokens", ep, line)
		}
		entries = append(entries, e)
		g := byPriority[e.Priority]
		if g == nil {
			g = &Gazetteer{Name: ep, Priority: e.Priority}
			byPriority[e.Priority] = g
		}
		g.Entries = append(g.Entries, Entry{Phrase: strings.Join(e.Tokens, " "), Tokens: e.Tokens, Type: e.Type, Line: line})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", ep, line+1, err)
	}
	if line != s.Entries {
		return nil, fmt.Errorf("%s: %d entries, %s records %d (truncated?)", ep, line, overlaySettingsFile, s.Entries)
	}
	gazetteers := slices.SortedFunc(maps.Values(byPriority), func(a, b *Gazetteer) int { return cmp.Compare(a.Priority, b.Priority) })
	opts := []Option{WithCase(cm), WithUnicodeForm(uf), WithStopwords(s.Stopwords)}
	m, err := NewMatcher(gazetteers, opts...)
	if err != nil {
		return nil, err
	}
	o := newGazetteerOverlay(m, s, entries, opts)
	if n := s.Names; n != nil {
		lists := NameLists{First: wordSet(n.First), Titles: wordSet(n.Titles), Otherwise: wordSet(n.Otherwise), Common: wordSet(n.Nameless), Heads: n.Heads}
		o.WithNames(lists, n.Common, max(n.MinCommon, 1))
	}
	return o, nil
}

func wordSet(words []string) map[string]bool {
	set := make(map[string]bool, len(words))
	for _, w := range words {
		set[w] = true
	}
	return set
}

// MineEntries makes a gazetteer of the entities of a distantly labeled
// corpus (tags in any scheme): each distinct token sequence tagged as an
// entity, with the type it has most often, in the order the corpus first
// tags it. A sequence whose types tie gets an entry for each, which the
// matcher resolves as ambiguous (it adds no entity); spans of the unknown
// type are left out. It is the gazetteer of a run whose distant labels
// were given as files. name names it in errors and reports.
func MineEntries(c *corpus.Corpus, name string) (*Gazetteer, error) {
	type mined struct {
		tokens []string
		line   int
		counts map[string]int
	}
	var order []*mined
	byKey := map[string]*mined{}
	for i, s := range c.Sentences {
		if s.Tags == nil {
			return nil, fmt.Errorf("%s: sentence %d has no tags to mine entities from", name, i+1)
		}
		spans, err := corpus.AnyScheme.Spans(s.Tags)
		if err != nil {
			return nil, fmt.Errorf("%s: sentence %d: %w", name, i+1, err)
		}
		for _, sp := range spans {
			if sp.Label == corpus.UnknownType {
				continue
			}
			toks := s.Tokens[sp.Start:sp.End]
			key := strings.Join(toks, keySep)
			md := byKey[key]
			if md == nil {
				md = &mined{tokens: slices.Clone(toks), line: i + 1, counts: map[string]int{}}
				byKey[key] = md
				order = append(order, md)
			}
			md.counts[sp.Label]++
		}
	}
	g := &Gazetteer{Name: name, Report: LoadReport{Source: name, Types: map[string]int{}}}
	for _, md := range order {
		best := slices.Max(slices.Collect(maps.Values(md.counts)))
		for _, typ := range slices.Sorted(maps.Keys(md.counts)) {
			if md.counts[typ] == best {
				g.Entries = append(g.Entries, Entry{Phrase: strings.Join(md.tokens, " "), Tokens: md.tokens, Type: typ, Line: md.line})
				g.Report.Types[typ]++
			}
		}
	}
	g.Report.Entries = len(g.Entries)
	return g, nil
}
