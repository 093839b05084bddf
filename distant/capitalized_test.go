package distant

import (
	"reflect"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/dataset"
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

// TestLabelLongerNames: a run of capitalized words that holds matches is a
// longer name in their place, whatever their type; a title, a common word
// or a stopword breaks a run, and a run of matches and words that name
// nothing is no longer name.
func TestLabelLongerNames(t *testing.T) {
	c := sentences(
		"the Atlanta Heights Club met U.S. Treasury Secretary Robert Rubin , and Atlanta on Friday",
		"Nigerian Secretary Robert Rubin saw Atlanta Jr. and Atlanta Heights",
	)
	gs := readNamed(t, "g.tsv", "LOC\tAtlanta\nLOC\tU.S.\nPER\tRobert Rubin\n")
	lists := NameLists{Titles: map[string]bool{"Secretary": true}, Common: map[string]bool{"Friday": true}}
	labeled, r, err := Run(c, gs, nil, corpus.IO, WithCapitalized(&Capitalized{Nameless: lists.Nameless(), MinCommon: 2}))
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"O", "I-?", "I-?", "I-?", "O", "I-?", "I-?", "O", "I-PER", "I-PER", "O", "O", "I-LOC", "O", "O"},
		// Nigerian is a phrase of its own; Jr. names nothing.
		{"I-?", "O", "I-PER", "I-PER", "O", "I-LOC", "O", "O", "I-?", "I-?"},
	}
	if got := tagsOf(labeled); !reflect.DeepEqual(got, want) {
		t.Errorf("tags\n got %v\nwant %v", got, want)
	}
	if cr := r.Capitalized; cr == nil || cr.Labeled != 4 || cr.Longer != 3 {
		t.Errorf("report %+v, want 4 phrases, 3 of them longer names", cr)
	}
}

// TestLabelHeadWords: a phrase of two words or more that ends in a head
// word is an entity of the head's type, a longer name too; a head word
// alone is a phrase of unknown type. The report counts them by type.
func TestLabelHeadWords(t *testing.T) {
	c := sentences("the Westfield Young Democratic Club met in Morris County , and the Club and Atlanta Heights agreed")
	gs := readNamed(t, "g.tsv", "MISC\tDemocratic\nLOC\tAtlanta\n")
	var lists NameLists
	if err := ReadNameLists(strings.NewReader("head:ORG\tClub\nhead:LOC\tCounty\nhead:LOC\tHeights\n"), "names.tsv", &lists); err != nil {
		t.Fatal(err)
	}
	labeled, r, err := Run(c, gs, nil, corpus.IO, WithCapitalized(&Capitalized{Nameless: lists.Nameless(), MinCommon: 2, Heads: lists.Heads}))
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"O", "I-ORG", "I-ORG", "I-ORG", "I-ORG", "O", "O", "I-LOC", "I-LOC", "O", "O", "O", "I-?", "O", "I-LOC", "I-LOC", "O"}}
	if got := tagsOf(labeled); !reflect.DeepEqual(got, want) {
		t.Errorf("tags\n got %v\nwant %v", got, want)
	}
	cr := r.Capitalized
	if cr == nil || cr.Labeled != 4 || cr.Longer != 2 || !reflect.DeepEqual(cr.Typed, map[string]int{"ORG": 1, "LOC": 2}) {
		t.Errorf("report %+v, want 4 phrases, 2 longer names, ORG 1 and LOC 2 typed", cr)
	}
	if r.Matches["MISC"] != 0 || r.Matches["LOC"] != 0 || r.Matches["ORG"] != 0 {
		t.Errorf("matches %v: the longer names replace theirs, and typed phrases are no matches", r.Matches)
	}
}

// TestCapitalizedScoredAsO: on gold sentences the phrases predict no type,
// so the labels' P/R/F1 change only where a longer name replaces the
// matches it holds; the report counts how many have a gold entity's
// boundaries.
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
	// The match Atlanta, wrong, is held by the longer name Atlanta Heights.
	if p, c := plain.Gold.Report.Micro, caps.Gold.Report.Micro; p.Predicted != 1 || c.Predicted != 0 || c.Correct != 0 || c.Support != p.Support {
		t.Errorf("micro scores %+v with phrases, %+v without", c, p)
	}
	// Pfaff, Tims and Atlanta Heights.
	if caps.Gold.UnknownSpans != 3 || caps.Gold.UnknownExact != 3 {
		t.Errorf("unknown spans %d (%d exact), want 3 (3 exact)", caps.Gold.UnknownSpans, caps.Gold.UnknownExact)
	}
}

// TestCapitalizedNeedsCapitalizedEntities leaves the phrases out of a text
// whose typed matches, beside a sentence's first word, mostly begin in
// lower case (chemicals and diseases), and says so in the report; a
// sentence's first word is capitalized by rule and counts for neither.
func TestCapitalizedNeedsCapitalizedEntities(t *testing.T) {
	c := sentences(
		"Aspirin induced hepatitis in rats given naloxone at Boston .",
		"the naloxone group and the Control group in Boston",
		"hepatitis followed Aspirin .",
	)
	gs := readNamed(t, "chem.tsv", "CHEM\taspirin\nCHEM\tnaloxone\nCHEM\tAspirin\nDISEASE\thepatitis\n")
	caps := &Capitalized{MinCommon: 2, MinShare: DefaultMinCapitalShare}
	labeled, r, err := Run(c, gs, nil, corpus.BIO, WithCapitalized(caps))
	if err != nil {
		t.Fatal(err)
	}
	// Counted: hepatitis, naloxone (sentence 1), naloxone (2), Aspirin (3): 1 of 4.
	cr := r.Capitalized
	if cr == nil || cr.Added || cr.Entities != 4 || cr.Capital != 1 || cr.MinShare != DefaultMinCapitalShare || cr.Labeled != 0 {
		t.Fatalf("report %+v, want no phrases, 1 capital of 4 entities", cr)
	}
	if got := strings.Join(labeled.Sentences[1].Tags, " "); got != "O B-CHEM O O O O O O O" {
		t.Errorf("sentence 2: %s, want its match alone", got)
	}
	var txt strings.Builder
	if err := r.WriteText(&txt); err != nil || !strings.Contains(txt.String(), "no capitalized phrases: 1 of the labels' 4 typed entities") {
		t.Errorf("report text %q (%v)", txt.String(), err)
	}

	// At a share of 0.25 the same text is taken to capitalize its names.
	caps.MinShare = 0.25
	labeled, r, err = Run(c, gs, nil, corpus.BIO, WithCapitalized(caps))
	if err != nil {
		t.Fatal(err)
	}
	if cr := r.Capitalized; !cr.Added || cr.Labeled != 3 {
		t.Errorf("report %+v, want Boston, Control and Boston added", cr)
	}
	if got := strings.Join(labeled.Sentences[1].Tags, " "); got != "O B-CHEM O O O B-? O O B-?" {
		t.Errorf("sentence 2: %s", got)
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
	labeled := imp("train.conll", "Mr. O\nPfaff O\nvisited O\nAtlanta B-LOC\nwith O\nMay O\nStein O\n\nJAPAN B-LOC\nGET O\nLUCKY O\nWIN O\n\nthey O\nsaw O\nthe O\nAtlanta B-LOC\nHeights O\nClub O\n", "corpus")
	lists := imp("names.tsv", "title\tMr.\nhead:ORG\tClub\n", "names")
	stop := imp("stop.txt", "May\n", "stopwords")
	// Labels that refine.vote names keep their name (refine.choose checks it).
	labeled.Meta = map[string]string{dataset.MetaLabels: "refined"}
	s, params := resolvedStage(t, StageCapitalized, map[string]any{"scheme": "io"})
	outs, err := stages.Exec(ctx, s, stages.Env{Store: st, Params: params, OutputPrefix: "runs/1/capitalized",
		Inputs: map[string][]stages.Artifact{"corpus": {labeled}, "names": {lists}, "stopwords": {stop}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := outs["labeled"].Meta[dataset.MetaLabels]; got != "refined" {
		t.Errorf("meta labels %q, want the input's, refined", got)
	}
	got, err := stages.NewInput(ctx, st, outs["labeled"]).ReadFile("labeled.conll")
	if err != nil {
		t.Fatal(err)
	}
	out, err := corpus.Read(strings.NewReader(string(got)), "labeled.conll", corpus.FormatCoNLL)
	if err != nil {
		t.Fatal(err)
	}
	// The longer name Atlanta Heights Club replaces the given Atlanta, typed by its head word.
	want := [][]string{{"O", "I-?", "O", "I-LOC", "O", "O", "I-?"}, {"I-LOC", "O", "O", "O"}, {"O", "O", "O", "I-ORG", "I-ORG", "I-ORG"}}
	if tags := tagsOf(out); !reflect.DeepEqual(tags, want) {
		t.Errorf("tags %v, want %v", tags, want)
	}
	var rep CapitalizedReport
	if err := stages.NewInput(ctx, st, outs["report"]).ReadJSON("report.json", &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Labeled != 3 || rep.Distinct != 3 || rep.Longer != 1 || rep.Typed["ORG"] != 1 || !rep.Added || rep.Entities != 2 || rep.Capital != 2 {
		t.Errorf("report %+v", rep)
	}

	// Labels whose entities are written in lower case keep their tags
	// alone, in the stage's scheme.
	lower := imp("lower.conll", "rats O\ngiven O\nnaloxone B-CHEM\nin O\nBoston O\n\nthe O\nhepatitis B-DISEASE\ngroup O\n", "corpus")
	outs, err = stages.Exec(ctx, s, stages.Env{Store: st, Params: params, OutputPrefix: "runs/3/capitalized",
		Inputs: map[string][]stages.Artifact{"corpus": {lower}, "names": {lists}}})
	if err != nil {
		t.Fatal(err)
	}
	got, err = stages.NewInput(ctx, st, outs["labeled"]).ReadFile("labeled.conll")
	if err != nil {
		t.Fatal(err)
	}
	if out, err = corpus.Read(strings.NewReader(string(got)), "labeled.conll", corpus.FormatCoNLL); err != nil {
		t.Fatal(err)
	}
	if want := [][]string{{"O", "O", "I-CHEM", "O", "O"}, {"O", "I-DISEASE", "O"}}; !reflect.DeepEqual(tagsOf(out), want) {
		t.Errorf("lower-case entities: tags %v, want %v", tagsOf(out), want)
	}
	rep = CapitalizedReport{}
	if err := stages.NewInput(ctx, st, outs["report"]).ReadJSON("report.json", &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Added || rep.Entities != 2 || rep.Capital != 0 || rep.Labeled != 0 {
		t.Errorf("lower-case entities: report %+v", rep)
	}
	bad := imp("bad.conll", "Pfaff O\nvisited\n", "corpus")
	if _, err := stages.Exec(ctx, s, stages.Env{Store: st, Params: params, OutputPrefix: "runs/2/capitalized",
		Inputs: map[string][]stages.Artifact{"corpus": {bad}}}); err == nil {
		t.Error("a malformed corpus: no error")
	}
}
