package distant

import (
	"reflect"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/corpus"
)

// TestLabelCapitalized checks each rule of capitalized phrases on a small
// corpus: a sentence start counts only if the text never writes the word
// in lower case; titles, common words and initials are left out at either
// end, and so are a name's suffixes; a leading word the text writes in
// lower case min_common times is left out, one it writes less often is
// kept; matches are never touched, nor runs beside them (Emory University
// and Atlanta are two runs).
func TestLabelCapitalized(t *testing.T) {
	c := sentences(
		`" Barnett said Mr. Pfaff saw Emory University in Atlanta on Friday .`,
		"the county and the other county",
		"The Fulton County Court met ; the County Court and I agreed with J. Smith Jr. , Other news",
	)
	gs := readNamed(t, "places.tsv", "LOC\tAtlanta\n")
	lists := NameLists{Titles: map[string]bool{"Mr.": true}, Common: map[string]bool{"Friday": true, "I": true}}
	labeled, r, err := Run(c, gs, nil, corpus.BIO, WithCapitalized(&Capitalized{Nameless: lists.Nameless(), MinCommon: 2}))
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"O", "B-?", "O", "O", "B-?", "O", "B-?", "I-?", "O", "B-LOC", "O", "O", "O"},
		{"O", "O", "O", "O", "O", "O"},
		// "the" starts sentences; "county" is written twice, "other" once.
		{"O", "B-?", "I-?", "I-?", "O", "O", "O", "O", "B-?", "O", "O", "O", "O", "O", "B-?", "O", "O", "B-?", "O"},
	}
	if got := tagsOf(labeled); !reflect.DeepEqual(got, want) {
		t.Errorf("tags\n got %v\nwant %v", got, want)
	}
	cr := r.Capitalized
	if cr == nil {
		t.Fatal("no capitalized phrases in the report")
	}
	if cr.Labeled != 7 || cr.Distinct != 7 {
		t.Errorf("report: %d labeled, %d distinct; want 7 and 7", cr.Labeled, cr.Distinct)
	}
	if r.Matches["LOC"] != 1 || r.UnknownMatches != 0 {
		t.Errorf("matches %v, unknown %d: the gazetteer's counts must not include the phrases", r.Matches, r.UnknownMatches)
	}

	// Off, the same corpus keeps its gazetteer matches only.
	plain, r, err := Run(c, gs, nil, corpus.BIO)
	if err != nil {
		t.Fatal(err)
	}
	if r.Capitalized != nil || strings.Contains(strings.Join(plain.Sentences[0].Tags, " "), "?") {
		t.Errorf("capitalized phrases without WithCapitalized: %v", plain.Sentences[0].Tags)
	}
}

// TestCapitalizedScoredAsO: on gold sentences the phrases predict no type,
// so the labels' P/R/F1 do not change; the report counts how many have a
// gold entity's boundaries.
func TestCapitalizedScoredAsO(t *testing.T) {
	gold := &corpus.Corpus{Sentences: []corpus.Sentence{{
		Tokens: strings.Fields("she met Pfaff and Tims in Atlanta Heights"),
		Tags:   strings.Fields("O O B-PER O B-PER O B-LOC I-LOC"),
	}}}
	gs := readNamed(t, "places.tsv", "LOC\tAtlanta\n")
	_, plain, err := Run(gold, gs, gold, corpus.BIO)
	if err != nil {
		t.Fatal(err)
	}
	_, caps, err := Run(gold, gs, gold, corpus.BIO, WithCapitalized(&Capitalized{MinCommon: 2}))
	if err != nil {
		t.Fatal(err)
	}
	if p, c := plain.Gold.Report.Micro, caps.Gold.Report.Micro; p != c {
		t.Errorf("micro scores %+v with phrases, %+v without", c, p)
	}
	// Pfaff and Tims; Heights touches the match Atlanta, and is no phrase.
	if caps.Gold.UnknownSpans != 2 || caps.Gold.UnknownExact != 2 {
		t.Errorf("unknown spans %d (%d exact), want 2 (2 exact)", caps.Gold.UnknownSpans, caps.Gold.UnknownExact)
	}
}

func TestReadNameListsCommon(t *testing.T) {
	var lists NameLists
	if err := ReadNameLists(strings.NewReader("first\tJohn\ntitle\tMr.\ncommon\tFriday\n"), "names.tsv", &lists); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"Mr.": true, "Friday": true}
	if got := lists.Nameless(); !reflect.DeepEqual(got, want) {
		t.Errorf("Nameless() = %v, want %v", got, want)
	}
	if lists.First["Friday"] || lists.Titles["Friday"] {
		t.Error("a common word read as a first name or title")
	}
}
