package distant

import (
	"bytes"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/corpus"
)

// fixtureMatcher compiles testdata/core.txt (typed; "lithium" is both a
// Chemical and a Disease there) and testdata/full.txt (untyped).
func fixtureMatcher(t *testing.T, opts ...Option) *Matcher {
	t.Helper()
	var gs []*Gazetteer
	for _, path := range []string{"testdata/core.txt", "testdata/full.txt"} {
		g, err := Load(Source{Path: path}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		gs = append(gs, g)
	}
	return matcher(t, gs, opts...)
}

func sentences(lines ...string) *corpus.Corpus {
	c := &corpus.Corpus{}
	for _, l := range lines {
		c.Sentences = append(c.Sentences, corpus.Sentence{Tokens: strings.Fields(l)})
	}
	return c
}

var labelCorpus = sentences(
	"congestive heart failure and lithium carbonate toxicity",
	"tricuspid regurgitation after lithium",
	"no entity here",
)

func tagsOf(c *corpus.Corpus) [][]string {
	var out [][]string
	for _, s := range c.Sentences {
		out = append(out, s.Tags)
	}
	return out
}

func TestLabelSchemes(t *testing.T) {
	m := fixtureMatcher(t)
	cases := map[corpus.Scheme][][]string{
		corpus.BIO: {
			{"B-Disease", "I-Disease", "I-Disease", "O", "B-Chemical", "I-Chemical", "B-Disease"},
			{"B-?", "I-?", "O", "B-?"},
			{"O", "O", "O"},
		},
		corpus.BIOES: {
			{"B-Disease", "I-Disease", "E-Disease", "O", "B-Chemical", "E-Chemical", "S-Disease"},
			{"B-?", "E-?", "O", "S-?"},
			{"O", "O", "O"},
		},
		corpus.IO: {
			{"I-Disease", "I-Disease", "I-Disease", "O", "I-Chemical", "I-Chemical", "I-Disease"},
			{"I-?", "I-?", "O", "I-?"},
			{"O", "O", "O"},
		},
	}
	for scheme, want := range cases {
		out, _, err := Label(m, labelCorpus, scheme)
		if err != nil {
			t.Fatal(err)
		}
		if got := tagsOf(out); !reflect.DeepEqual(got, want) {
			t.Errorf("%v:\n got %q\nwant %q", scheme, got, want)
		}
	}
	if _, err := m.NewLabeler(corpus.AnyScheme); err == nil {
		t.Error("AnyScheme: no error")
	}
}

func TestLabelReport(t *testing.T) {
	_, r, err := Label(fixtureMatcher(t), labelCorpus, corpus.BIO)
	if err != nil {
		t.Fatal(err)
	}
	if r.Sentences != 3 || r.Tokens != 14 || r.SentencesWithMatch != 2 {
		t.Errorf("sentences %d tokens %d with match %d; want 3 14 2", r.Sentences, r.Tokens, r.SentencesWithMatch)
	}
	if want := map[string]int{"Disease": 2, "Chemical": 1}; !reflect.DeepEqual(r.Matches, want) {
		t.Errorf("matches %v, want %v", r.Matches, want)
	}
	if r.UnknownMatches != 1 || r.AmbiguousMatches != 1 || r.TypedTokens != 6 || r.UnknownTokens != 3 {
		t.Errorf("unknown %d ambiguous %d typed tokens %d unknown tokens %d; want 1 1 6 3",
			r.UnknownMatches, r.AmbiguousMatches, r.TypedTokens, r.UnknownTokens)
	}
	if math.Abs(r.Coverage-6.0/14) > 1e-12 || math.Abs(r.UnknownCoverage-3.0/14) > 1e-12 || math.Abs(r.SentenceCoverage-2.0/3) > 1e-12 {
		t.Errorf("coverage %v %v %v", r.Coverage, r.UnknownCoverage, r.SentenceCoverage)
	}
	var top []string
	for _, p := range r.TopPhrases {
		top = append(top, p.Phrase)
	}
	wantTop := []string{"congestive heart failure", "lithium", "lithium carbonate", "toxicity", "tricuspid regurgitation"}
	if !reflect.DeepEqual(top, wantTop) {
		t.Errorf("top phrases %q, want %q", top, wantTop)
	}
	amb := r.AmbiguousPhrases
	if len(amb) != 1 || amb[0].Phrase != "lithium" || !reflect.DeepEqual(amb[0].Types, []string{"Chemical", "Disease"}) || amb[0].Count != 1 {
		t.Errorf("ambiguous phrases %+v", amb)
	}
	if len(r.Gazetteers) != 2 || r.Gazetteers[0].Conflicts.Count != 1 || r.Gold != nil {
		t.Errorf("gazetteers %+v gold %+v", r.Gazetteers, r.Gold)
	}
}

func TestLabelAmbiguousAsOutside(t *testing.T) {
	m := fixtureMatcher(t, WithAmbiguous(AsOutside))
	out, r, err := Label(m, sentences("lithium carbonate lithium carbonate after lithium"), corpus.IO)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"I-Chemical", "I-Chemical", "I-Chemical", "I-Chemical", "O", "O"}
	if got := out.Sentences[0].Tags; !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if r.IOMerges != 1 || r.AmbiguousMatches != 1 || r.UnknownTokens != 0 {
		t.Errorf("io merges %d ambiguous %d unknown tokens %d; want 1 1 0", r.IOMerges, r.AmbiguousMatches, r.UnknownTokens)
	}
}

func TestLabelScoreAgainstGold(t *testing.T) {
	m := fixtureMatcher(t)
	l, err := m.NewLabeler(corpus.BIO)
	if err != nil {
		t.Fatal(err)
	}
	gold := []corpus.Sentence{
		{Tokens: strings.Fields("lithium carbonate toxicity in tricuspid regurgitation"),
			Tags: []string{"B-Chemical", "I-Chemical", "B-Disease", "O", "B-Disease", "I-Disease"}},
		{Tokens: strings.Fields("lithium toxicity"), Tags: []string{"B-Chemical", "B-Disease"}},
	}
	for _, g := range gold {
		if err := l.Score(g); err != nil {
			t.Fatal(err)
		}
	}
	l.SetGoldSource("gold.ck")
	r := l.Report()
	if r.Sentences != 0 {
		t.Errorf("gold sentences counted in the corpus statistics: %d", r.Sentences)
	}
	g := r.Gold
	if g == nil || g.Source != "gold.ck" {
		t.Fatalf("gold report %+v", g)
	}
	// Predicted: lithium carbonate (Chemical), toxicity (Disease) twice;
	// tricuspid regurgitation (unknown) and lithium (ambiguous) read as O.
	micro := g.Report.Micro
	if micro.Support != 5 || micro.Predicted != 3 || micro.Correct != 3 || micro.Precision != 1 || math.Abs(micro.Recall-0.6) > 1e-12 || math.Abs(micro.F1-0.75) > 1e-12 {
		t.Errorf("micro %+v", micro)
	}
	if c := g.Report.Types["Chemical"]; c.Support != 2 || c.Correct != 1 || c.Recall != 0.5 {
		t.Errorf("Chemical %+v", c)
	}
	if d := g.Report.Types["Disease"]; d.Support != 3 || d.Predicted != 2 || d.Correct != 2 {
		t.Errorf("Disease %+v", d)
	}
	if g.UnknownSpans != 2 || g.UnknownExact != 2 {
		t.Errorf("unknown spans %d exact %d; want 2 2", g.UnknownSpans, g.UnknownExact)
	}
	if err := l.Score(corpus.Sentence{Tokens: []string{"x"}}); err == nil {
		t.Error("untagged gold sentence: no error")
	}

	var buf bytes.Buffer
	if err := r.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"testdata/core.txt (typed, priority 0): 7 entries (Chemical 3, Disease 4); 1 duplicates, 1 type conflicts, 1 empty, 1 without tokens",
		"against gold labels (gold.ck), unknown-type spans read as O:",
		"micro avg     100.00    60.00    75.00        5          3        3",
		"unknown-type spans on the gold sentences: 2, of which 2 have exactly a gold entity's boundaries",
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("report text lacks %q:\n%s", want, buf.String())
		}
	}
}

func TestLabelUntypedAsOutside(t *testing.T) {
	m := fixtureMatcher(t, WithUntyped(AsOutside))
	out, r, err := Label(m, labelCorpus, corpus.BIO)
	if err != nil {
		t.Fatal(err)
	}
	// "tricuspid regurgitation" is untyped: O; "lithium" is still ambiguous.
	want := []string{"O", "O", "O", "B-?"}
	if got := out.Sentences[1].Tags; !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if r.UnknownMatches != 1 || r.UnknownTokens != 1 || r.UntypedAs != "o" || r.AmbiguousAs != "unknown" {
		t.Errorf("unknown matches %d tokens %d, untyped as %s, ambiguous as %s", r.UnknownMatches, r.UnknownTokens, r.UntypedAs, r.AmbiguousAs)
	}
}

// readNamed reads gazetteers given as pairs of file name and text.
func readNamed(t *testing.T, nameText ...string) []*Gazetteer {
	t.Helper()
	var gs []*Gazetteer
	for i := 0; i+1 < len(nameText); i += 2 {
		g, err := Read(strings.NewReader(nameText[i+1]), Source{Path: nameText[i]})
		if err != nil {
			t.Fatal(err)
		}
		gs = append(gs, g)
	}
	return gs
}

// TestReportWarnings: an empty gazetteer and a type that only one
// gazetteer has ("Chemicals", a typo of the other's "Chemical") are named
// in the report's warnings; types two places share are not.
func TestReportWarnings(t *testing.T) {
	gs := readNamed(t, "a.tsv", "Chemical\tlithium\nDisease\theart failure\n",
		"b.tsv", "Chemicals\taspirin\nDisease\ttoxicity\n", "empty.txt", "")
	_, r, err := Run(labelCorpus, gs, nil, corpus.BIO)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"gazetteer empty.txt is empty: it labels nothing",
		"type Chemical appears only in gazetteer a.tsv, and gazetteer b.tsv has Chemicals: a typo?",
		"type Chemicals appears only in gazetteer b.tsv, and gazetteer a.tsv has Chemical: a typo?",
	}
	if !reflect.DeepEqual(r.Warnings, want) {
		t.Errorf("warnings:\n%q\nwant\n%q", r.Warnings, want)
	}
	var txt bytes.Buffer
	if err := r.WriteText(&txt); err != nil || !strings.Contains(txt.String(), "warning: gazetteer empty.txt is empty") {
		t.Errorf("text report lacks the warnings (%v):\n%s", err, txt.String())
	}
}

// TestReportWarningsUntypedList: one typed gazetteer beside an untyped
// phrase list (BC5CDR's dict_core.txt and dict_full.txt) or a list of one
// other type (person names beside a LOC/ORG gazetteer, as in the main job)
// is no sign of a typo: no type is spelled almost like another, so nothing
// is warned.
func TestReportWarningsUntypedList(t *testing.T) {
	gs := readNamed(t, "core.tsv", "Chemical\tlithium\nDisease\theart failure\n", "full.txt", "aspirin\ntoxicity\n",
		"places.tsv", "LOC\tParis\nORG\tUnited Nations\n", "names.tsv", "PER\tAnna\n")
	_, r, err := Run(labelCorpus, gs, nil, corpus.BIO)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Warnings) != 0 {
		t.Errorf("warnings %q, want none", r.Warnings)
	}
}

func TestNearlySpelled(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"Chemical", "Chemicals", true}, {"Disease", "disease", true}, {"Disease", "Diseases", true},
		{"PER", "PERS", true}, {"LOC", "ORG", false}, {"PER", "LOC", false}, {"MISC", "ORG", false},
		{"Chemical", "Disease", false}, {"GPE", "LOC", false},
	} {
		if got := nearlySpelled(c.a, c.b); got != c.want {
			t.Errorf("nearlySpelled(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}
