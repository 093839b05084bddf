package distant

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/corpus"
)

// TestLongFormFits checks Schwartz and Hearst's test on worked cases.
func TestLongFormFits(t *testing.T) {
	cases := []struct {
		short string
		long  string
		want  bool
	}{
		{"NTG", "nitroglycerin", true},
		{"ASA", "acetylsalicylic acid", true},
		{"5-FU", "5 - fluorouracil", true},
		{"D-pen", "D - penicillamine", true},
		{"NO", "nitric oxide", true},
		{"HIV", "hepatitis", false},     // no v
		{"TNG", "nitroglycerin", false}, // the letters out of order
		{"GT", "nitroglycerin", false},  // g starts no word
		{"P=0.03", "lithium", false},    // a p-value after a name
		{"CHF", "heart failure", false}, // c nowhere
		{"MI", "myocardial infarction", true},
		{"ROS", "reactive oxygen species", true},
	}
	for _, c := range cases {
		if got := longFormFits(c.short, strings.Fields(c.long)); got != c.want {
			t.Errorf("longFormFits(%q, %q) = %v, want %v", c.short, c.long, got, c.want)
		}
	}
}

func TestIsShortForm(t *testing.T) {
	cases := map[string]bool{
		"NTG":         true,
		"D - pen":     true,
		"5-FU":        true,
		"rats":        false, // no capital: a lower-case word would be labeled everywhere
		"N":           false, // one character
		"ABCDEFGHIJK": false, // eleven
		"- NO":        false, // starts with a mark
		"a b c d":     false, // four tokens
	}
	for s, want := range cases {
		toks := strings.Fields(s)
		if len(toks) > maxShortFormTokens {
			if want {
				t.Errorf("%q: too many tokens for a short form", s)
			}
			continue
		}
		if got := isShortForm(toks); got != want {
			t.Errorf("isShortForm(%q) = %v, want %v", s, got, want)
		}
	}
}

// abbreviationGazetteers: nitroglycerin and aspirin are chemicals, aortic
// stenosis a disease; NTG is an untyped phrase (as in BC5CDR's dict_full),
// and NO is a typed disease name nowhere.
func abbreviationGazetteers(t *testing.T) []*Gazetteer {
	return readNamed(t,
		"core.tsv", "Chemical\tnitroglycerin\nChemical\taspirin\nChemical\tnitric oxide\nDisease\taortic stenosis\nDisease\theadache\n",
		"full.txt", "NTG\n")
}

// TestLabelAbbreviations labels a corpus whose sentence splitter cut before
// the parenthesis of a definition: the short forms take their long forms'
// types everywhere, before the definition too, replacing an untyped match
// of exactly their tokens; the lower-case word "no" is not NO; AS, defined
// with two types, is left alone; the report counts it all.
func TestLabelAbbreviations(t *testing.T) {
	c := sentences(
		"NTG was given before the test",
		"patients received nitroglycerin",
		"( NTG ) -induced headache was common",
		"nitric oxide ( NO ) levels rose , no change in NO2",
		"aspirin ( AS ) and aortic stenosis ( AS ) differ",
		"AS again and NO again",
	)
	gs := abbreviationGazetteers(t)
	labeled, r, err := Run(c, gs, nil, corpus.BIO, WithAbbreviations(true))
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"B-Chemical", "O", "O", "O", "O", "O"},
		{"O", "O", "B-Chemical"},
		{"O", "B-Chemical", "O", "O", "B-Disease", "O", "O"},
		{"B-Chemical", "I-Chemical", "O", "B-Chemical", "O", "O", "O", "O", "O", "O", "O", "O"},
		{"B-Chemical", "O", "O", "O", "O", "B-Disease", "I-Disease", "O", "O", "O", "O"},
		{"O", "O", "O", "B-Chemical", "O"},
	}
	if got := tagsOf(labeled); !reflect.DeepEqual(got, want) {
		t.Errorf("tags\n got %v\nwant %v", got, want)
	}
	a := r.Abbreviations
	if a == nil {
		t.Fatal("no abbreviations in the report")
	}
	if a.ShortForms != 2 || a.Conflicting != 1 || a.Labeled != 4 {
		t.Errorf("report: %d short forms, %d conflicting, %d labeled; want 2, 1, 4", a.ShortForms, a.Conflicting, a.Labeled)
	}
	wantTop := []ShortFormCount{
		{ShortForm: "NO", Type: "Chemical", Definitions: 1, Labeled: 2},
		{ShortForm: "NTG", Type: "Chemical", Definitions: 1, Labeled: 2},
	}
	if !reflect.DeepEqual(a.Top, wantTop) {
		t.Errorf("top %+v, want %+v", a.Top, wantTop)
	}
	var txt bytes.Buffer
	if err := r.WriteText(&txt); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(txt.String(), "abbreviations: 2 short forms defined after a typed match (1 more defined with several types, left out), 4 occurrences labeled") {
		t.Errorf("text report lacks the abbreviations:\n%s", txt.String())
	}

	// Off (the default): NTG stays of unknown type, NO stays O, and the
	// report says nothing of abbreviations.
	labeled, r, err = Run(c, gs, nil, corpus.BIO)
	if err != nil {
		t.Fatal(err)
	}
	if got := labeled.Sentences[0].Tags[0]; got != "B-?" {
		t.Errorf("without abbreviations NTG is %s, want B-?", got)
	}
	if got := labeled.Sentences[5].Tags[3]; got != "O" {
		t.Errorf("without abbreviations NO is %s, want O", got)
	}
	if r.Abbreviations != nil {
		t.Errorf("report has abbreviations without the option: %+v", r.Abbreviations)
	}
}

// TestAbbreviationsLoseToTypedMatches: a longer typed match keeps the
// tokens of a short form, and a name the gazetteer types inside the
// parentheses defines nothing ("aspirin ( ASP )" where ASP is a disease).
func TestAbbreviationsLoseToTypedMatches(t *testing.T) {
	gs := readNamed(t, "core.tsv", "Chemical\tnitroglycerin\nDisease\tNTG syndrome\nChemical\taspirin\nDisease\tASP\n")
	c := sentences("nitroglycerin ( NTG ) is given", "NTG syndrome and NTG", "aspirin ( ASP ) and ASP")
	labeled, r, err := Run(c, gs, nil, corpus.BIO, WithAbbreviations(true))
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"B-Chemical", "O", "B-Chemical", "O", "O", "O"},
		{"B-Disease", "I-Disease", "O", "B-Chemical"},
		{"B-Chemical", "O", "B-Disease", "O", "O", "B-Disease"},
	}
	if got := tagsOf(labeled); !reflect.DeepEqual(got, want) {
		t.Errorf("tags\n got %v\nwant %v", got, want)
	}
	if a := r.Abbreviations; a.ShortForms != 1 || a.Labeled != 2 {
		t.Errorf("report %+v: want NTG alone, labeled twice", a)
	}
}

// TestScoreWithAbbreviations: the gold sentences are labeled with the short
// forms the corpus defines, so the labels' score counts them.
func TestScoreWithAbbreviations(t *testing.T) {
	gs := abbreviationGazetteers(t)
	c := sentences("patients received nitroglycerin ( NTG )")
	gold := &corpus.Corpus{Sentences: []corpus.Sentence{
		{Tokens: strings.Fields("NTG and headache"), Tags: []string{"B-Chemical", "O", "B-Disease"}},
	}}
	for _, on := range []bool{false, true} {
		_, r, err := Run(c, gs, gold, corpus.BIO, WithAbbreviations(on))
		if err != nil {
			t.Fatal(err)
		}
		micro := r.Gold.Report.Micro
		wantCorrect := 1
		if on {
			wantCorrect = 2
		}
		if micro.Correct != wantCorrect || micro.Predicted != wantCorrect {
			t.Errorf("abbreviations %v: %d predicted, %d correct; want %d, %d", on, micro.Predicted, micro.Correct, wantCorrect, wantCorrect)
		}
	}
}

// TestTieBreakAbbreviations: the Tie-or-Break labels type a short form as
// the tags do, so the gaps around it are known breaks instead of the
// unknown gaps of an untyped phrase.
func TestTieBreakAbbreviations(t *testing.T) {
	c := sentences("NTG was given", "patients received nitroglycerin", "( NTG ) -induced headache")
	for _, on := range []bool{false, true} {
		m := matcher(t, abbreviationGazetteers(t), WithAbbreviations(on))
		got, _ := m.TieBreak(c)
		s := got[0]
		wantTypes, wantGap := []string{corpus.UnknownType}, UnknownBoundary
		if on {
			wantTypes, wantGap = []string{"Chemical"}, Break
		}
		if len(s.Segments) != 3 || !reflect.DeepEqual(s.Segments[0].Types, wantTypes) || s.Gaps[0] != wantGap {
			t.Errorf("abbreviations %v: segments %+v gaps %v; want NTG of types %v, then a gap %v", on, s.Segments, s.Gaps, wantTypes, wantGap)
		}
		if on && !reflect.DeepEqual(got[2].Segments[1].Types, []string{"Chemical"}) {
			t.Errorf("NTG in its definition: %+v", got[2].Segments)
		}
	}
}
