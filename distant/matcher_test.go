package distant

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// gaz reads a gazetteer from lines: "Type\tphrase" lines make a typed list,
// plain lines an untyped one.
func gaz(t *testing.T, priority int, lines ...string) *Gazetteer {
	t.Helper()
	g, err := Read(strings.NewReader(strings.Join(lines, "\n")), Source{Path: "test.txt", Priority: priority})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func matcher(t *testing.T, gs []*Gazetteer, opts ...Option) *Matcher {
	t.Helper()
	m, err := NewMatcher(gs, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// spans renders matches as "start-end:Type" ("?" for unknown, "*" for ambiguous).
func spans(ms []Match) []string {
	out := []string{}
	for _, m := range ms {
		label := m.Type
		switch m.Kind {
		case Unknown:
			label = "?"
		case Ambiguous:
			label = "*"
		}
		out = append(out, fmt.Sprintf("%d-%d:%s", m.Start, m.End, label))
	}
	return out
}

func matchSpans(m *Matcher, sentence string) []string {
	return spans(m.Scanner().Match(strings.Fields(sentence)))
}

func TestMatchLongestFirst(t *testing.T) {
	m := matcher(t, []*Gazetteer{gaz(t, 0,
		"Chemical\tlithium",
		"Chemical\tlithium carbonate",
		"Disease\theart failure",
		"Disease\tcongestive heart failure",
		"Disease\tfailure",
		"X\tA B",
		"Y\tB C D",
		"Z\tB C",
	)})
	cases := []struct {
		sentence string
		want     []string
	}{
		{"congestive heart failure and lithium carbonate toxicity", []string{"0-3:Disease", "4-6:Chemical"}},
		{"renal failure after lithium", []string{"1-2:Disease", "3-4:Chemical"}},
		// Longest first, not leftmost first: "B C D" beats "A B".
		{"A B C D", []string{"1-4:Y"}},
		// Equal length: the leftmost wins.
		{"A B C", []string{"0-2:X"}},
		{"nothing here", []string{}},
		{"", []string{}},
	}
	for _, c := range cases {
		if got := matchSpans(m, c.sentence); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: got %v, want %v", c.sentence, got, c.want)
		}
	}
}

func TestMatchUnknownAndTyped(t *testing.T) {
	core := gaz(t, 0, "Disease\tfailure", "Chemical\tlithium")
	full := gaz(t, 0, "heart failure", "lithium", "serum level")
	m := matcher(t, []*Gazetteer{core, full})
	// "heart failure" (unknown, 2 tokens) beats "failure" (typed, 1 token);
	// "lithium" is in both lists, and the typed entry names its type.
	got := matchSpans(m, "heart failure with high serum lithium")
	want := []string{"0-2:?", "5-6:Chemical"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestMatchPriorityAndAmbiguity(t *testing.T) {
	high := gaz(t, 2, "Chemical\tcocaine", "Chemical\tpuromycin")
	low := gaz(t, 1, "Disease\tcocaine", "Disease\tpuromycin")
	same := gaz(t, 2, "Disease\tpuromycin")
	m := matcher(t, []*Gazetteer{low, high, same})
	got := matchSpans(m, "cocaine and puromycin")
	want := []string{"0-1:Chemical", "2-3:*"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	p := m.Phrase(m.Scanner().Match([]string{"puromycin"})[0].Phrase)
	if p.Kind != Ambiguous || !reflect.DeepEqual(p.Types, []string{"Chemical", "Disease"}) || p.Text != "puromycin" {
		t.Errorf("ambiguous phrase = %+v", p)
	}
	if s := m.Stats(); s.Ambiguous != 1 || s.Phrases != 2 {
		t.Errorf("stats = %+v", s)
	}
	// A type given twice in one line ("Chemical,Disease") is a tie too.
	m = matcher(t, []*Gazetteer{gaz(t, 0, "Chemical,Disease\tNO")})
	if got := matchSpans(m, "NO"); !reflect.DeepEqual(got, []string{"0-1:*"}) {
		t.Errorf("two types on one line: %v", got)
	}
}

func TestMatchStopwords(t *testing.T) {
	g := gaz(t, 0, "Chemical\tthe", "Chemical\tof the", "Disease\tThe", "Chemical\tbag of words", "Chemical\tlead")
	m := matcher(t, []*Gazetteer{g}, WithStopwords([]string{"of", "THE"}))
	got := matchSpans(m, "The bag of words of the lead")
	want := []string{"1-4:Chemical", "6-7:Chemical"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if s := m.Stats(); s.StopwordPhrases != 3 || s.Entries != 5 {
		t.Errorf("stats = %+v, want 3 stopword phrases of 5", s)
	}
}

func TestMatchCaseModes(t *testing.T) {
	g := gaz(t, 0, "Chemical\tAspirin", "Disease\tHeart of Gold")
	sentence := "Aspirin aspirin ASPIRIN AsPiRiN Heart of Gold heart of gold HEART OF GOLD"
	cases := []struct {
		mode CaseMode
		want []string
	}{
		{CaseExact, []string{"0-1:Chemical", "4-7:Disease"}},
		{CaseFold, []string{"0-1:Chemical", "1-2:Chemical", "2-3:Chemical", "3-4:Chemical", "4-7:Disease", "7-10:Disease", "10-13:Disease"}},
		// No lower-case variant for a phrase with a stopword ("of").
		{CaseVariants, []string{"0-1:Chemical", "1-2:Chemical", "2-3:Chemical", "4-7:Disease", "10-13:Disease"}},
	}
	for _, c := range cases {
		m := matcher(t, []*Gazetteer{g}, WithCase(c.mode), WithStopwords([]string{"of"}))
		if got := matchSpans(m, sentence); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%v: got %v, want %v", c.mode, got, c.want)
		}
	}
}

func TestMatchVariantRanksBelowWrittenForm(t *testing.T) {
	// "AIDS" as written is a Disease; "Aids" (a made-up Chemical) has the
	// upper-case variant "AIDS", which must not make "AIDS" ambiguous.
	g := gaz(t, 0, "Disease\tAIDS", "Chemical\tAids")
	m := matcher(t, []*Gazetteer{g}, WithCase(CaseVariants))
	got := matchSpans(m, "AIDS Aids aids")
	want := []string{"0-1:Disease", "1-2:Chemical", "2-3:*"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestMatchUnicode(t *testing.T) {
	g := gaz(t, 0, "Chemical\t\ufb01brin", "Chemical\tcafe\u0301ine", "Chemical\tas\u200bpirin")
	// Format characters are dropped in every form.
	m := matcher(t, []*Gazetteer{g})
	if got := matchSpans(m, "aspirin fibrin caf\u00e9ine"); !reflect.DeepEqual(got, []string{"0-1:Chemical"}) {
		t.Errorf("none: %v", got)
	}
	m = matcher(t, []*Gazetteer{g}, WithUnicodeForm(FormNFC))
	if got := matchSpans(m, "aspirin fibrin caf\u00e9ine"); !reflect.DeepEqual(got, []string{"0-1:Chemical", "2-3:Chemical"}) {
		t.Errorf("nfc: %v", got)
	}
	m = matcher(t, []*Gazetteer{g}, WithUnicodeForm(FormNFKC))
	if got := matchSpans(m, "aspirin fibrin caf\u00e9ine"); !reflect.DeepEqual(got, []string{"0-1:Chemical", "1-2:Chemical", "2-3:Chemical"}) {
		t.Errorf("nfkc: %v", got)
	}
}

func TestMatchUnknownTokenResetsState(t *testing.T) {
	m := matcher(t, []*Gazetteer{gaz(t, 0, "X\ta b c", "Y\tb")})
	// "z" is in no phrase; "a b z b c" must not match "a b c" across it.
	if got := matchSpans(m, "a b z b c"); !reflect.DeepEqual(got, []string{"1-2:Y", "3-4:Y"}) {
		t.Errorf("got %v", got)
	}
}

// randomWorld makes a small vocabulary, phrases and sentences dense enough
// that phrases overlap, nest and share suffixes all the time.
func randomWorld(r *rand.Rand, vocab, phrases, sentences int) ([]*Gazetteer, [][]string) {
	word := func() string { return fmt.Sprintf("w%d", r.IntN(vocab)) }
	var lines []string
	for range phrases {
		n := 1 + r.IntN(4)
		toks := make([]string, n)
		for i := range toks {
			toks[i] = word()
		}
		typ := []string{"A", "B", ""}[r.IntN(3)]
		if typ == "" {
			lines = append(lines, strings.Join(toks, " "))
		} else {
			lines = append(lines, typ+"\t"+strings.Join(toks, " "))
		}
	}
	g := &Gazetteer{Name: "random"}
	for i, l := range lines {
		typ, phrase, ok := strings.Cut(l, "\t")
		if !ok {
			typ, phrase = "", l
		}
		g.Entries = append(g.Entries, Entry{Phrase: phrase, Tokens: strings.Fields(phrase), Type: typ, Line: i + 1})
	}
	var sents [][]string
	for range sentences {
		s := make([]string, r.IntN(30))
		for i := range s {
			s[i] = word()
			if r.IntN(10) == 0 {
				s[i] = "oov"
			}
		}
		sents = append(sents, s)
	}
	return []*Gazetteer{g}, sents
}

// TestAutomatonFindsEveryOccurrence checks the automaton against brute force
// and the scanner's final matches against the naive reference.
func TestAutomatonFindsEveryOccurrence(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 1))
		gs, sents := randomWorld(r, 2+int(seed%5), 5+int(seed)*3, 50)
		m := matcher(t, gs)
		sc, ref := m.Scanner(), m.Scanner()
		naive := newNaive(m)
		for _, s := range sents {
			got := slices.Clone(sc.Match(s))
			want := naive.match(ref, s)
			if !reflect.DeepEqual(spans(got), spans(want)) {
				t.Fatalf("seed %d, %q: automaton %v, naive %v", seed, s, spans(got), spans(want))
			}
			// Every occurrence, not only the kept ones: compare raw lists.
			sc.Match(s)
			naive.match(ref, s)
			ordered := func(x []rawMatch) []rawMatch {
				x = slices.Clone(x)
				slices.SortFunc(x, func(a, b rawMatch) int {
					return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(a.end, b.end))
				})
				return x
			}
			if a, b := ordered(sc.raw), ordered(ref.raw); !reflect.DeepEqual(a, b) {
				t.Fatalf("seed %d, %q: occurrences %v, want %v", seed, s, a, b)
			}
		}
	}
}

func TestMatchesDoNotOverlap(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	gs, sents := randomWorld(r, 3, 40, 200)
	m := matcher(t, gs)
	sc := m.Scanner()
	for _, s := range sents {
		end := 0
		for _, mt := range sc.Match(s) {
			if mt.Start < end || mt.End <= mt.Start || mt.End > len(s) {
				t.Fatalf("%q: bad or overlapping match %+v", s, mt)
			}
			end = mt.End
		}
	}
}

// TestScannersShareAMatcher runs scanners of one Matcher in parallel (run
// with -race): the Matcher must be read-only once built.
func TestScannersShareAMatcher(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	gs, sents := randomWorld(r, 4, 30, 300)
	m := matcher(t, gs)
	want := make([][]string, len(sents))
	sc := m.Scanner()
	for i, s := range sents {
		want[i] = spans(sc.Match(s))
	}
	errs := make(chan string, 4)
	for range 4 {
		go func() {
			sc := m.Scanner()
			for i, s := range sents {
				if got := spans(sc.Match(s)); !reflect.DeepEqual(got, want[i]) {
					errs <- fmt.Sprintf("%q: %v, want %v", s, got, want[i])
					return
				}
			}
			errs <- ""
		}()
	}
	for range 4 {
		if e := <-errs; e != "" {
			t.Error(e)
		}
	}
}
