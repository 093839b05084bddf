package distant

import (
	"reflect"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/stages"
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

func TestIsHeadline(t *testing.T) {
	for s, want := range map[string]bool{
		"SOCCER - JAPAN GET LUCKY WIN , CHINA IN SURPRISE DEFEAT .": true,
		"NOVYE ATAGI , Russia 1996-08-22":                           true,
		"KANSAS CITY 59 72 .450 18":                                 true,
		"NATO and the UN met in Brussels .":                         false, // two acronyms among seven words
		"Mr. Pfaff saw Emory University":                            false,
		"A B C":                                                     false, // one letter each: initials, not capitals
	} {
		if got := isHeadline(strings.Fields(s)); got != want {
			t.Errorf("isHeadline(%q) = %v, want %v", s, got, want)
		}
	}
}

// TestCapitalizedStage adds the phrases to labels given as they are: the
// given entities stay, phrases fill the gaps (none in a headline), the
// name lists' titles and the stopwords are left out, and the tags come
// out in the stage's scheme.
func TestCapitalizedStage(t *testing.T) {
	ctx, st, imp := stageStore(t)
	labeled := imp("train.conll", "Mr. O\nPfaff O\nvisited O\nAtlanta B-LOC\nwith O\nMay O\nStein O\n\nJAPAN B-LOC\nGET O\nLUCKY O\nWIN O\n", "corpus")
	lists := imp("names.tsv", "title\tMr.\n", "names")
	stop := imp("stop.txt", "May\n", "stopwords")
	s, ok := stages.Lookup(StageCapitalized)
	if !ok {
		t.Fatal("stage not registered")
	}
	params, err := s.ResolveParams(map[string]any{"scheme": "io"})
	if err != nil {
		t.Fatal(err)
	}
	outs, err := stages.Exec(ctx, s, stages.Env{Store: st, Params: params, OutputPrefix: "runs/1/capitalized",
		Inputs: map[string][]stages.Artifact{"corpus": {labeled}, "names": {lists}, "stopwords": {stop}}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := stages.NewInput(ctx, st, outs["labeled"]).ReadFile("labeled.conll")
	if err != nil {
		t.Fatal(err)
	}
	out, err := corpus.Read(strings.NewReader(string(got)), "labeled.conll", corpus.FormatCoNLL)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"O", "I-?", "O", "I-LOC", "O", "O", "I-?"}, {"I-LOC", "O", "O", "O"}}
	if tags := tagsOf(out); !reflect.DeepEqual(tags, want) {
		t.Errorf("tags %v, want %v", tags, want)
	}
	var rep CapitalizedReport
	if err := stages.NewInput(ctx, st, outs["report"]).ReadJSON("report.json", &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Labeled != 2 || rep.Distinct != 2 {
		t.Errorf("report %+v", rep)
	}
	bad := imp("bad.conll", "Pfaff O\nvisited\n", "corpus")
	if _, err := stages.Exec(ctx, s, stages.Env{Store: st, Params: params, OutputPrefix: "runs/2/capitalized",
		Inputs: map[string][]stages.Artifact{"corpus": {bad}}}); err == nil {
		t.Error("a malformed corpus: no error")
	}
}
