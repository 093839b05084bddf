package distant

import (
	"strings"
	"testing"

	"github.com/nerflow/nerflow/corpus"
)

func TestMineNames(t *testing.T) {
	var lists NameLists
	err := ReadNameLists(strings.NewReader("# lists\nfirst\tJohn\nfirst\tAnna\nfirst\tWill\n\ntitle\tSen.\ntitle\tVice\ntitle\tPresident\ntitle\tMrs.\n"), "names.tsv", &lists)
	if err != nil {
		t.Fatal(err)
	}
	c := &corpus.Corpus{}
	for _, s := range []string{
		"Appointment of John F. Tims Jr. , 41 , was announced .",
		"Sen. Kennedy met Vice President Johnson and Mrs. Anna Weber in Boston .",
		"Will Congress act ? It will , and it will soon .", // Will is a common word here
		"John said that John F. was late .",                // no surname after the initial
		"Anna Weber spoke ; Mrs. and JOHN SMITH did not .",
		"John Fulton County Court said the county court and the county jail were full .", // County and Court are common words
	} {
		c.Sentences = append(c.Sentences, corpus.Sentence{Tokens: strings.Fields(s)})
	}
	got := MineNames(c, lists, 2)
	want := []string{"John F. Tims Jr.", "Kennedy", "Johnson", "Anna Weber", "John Fulton"}
	if strings.Join(got.Phrases, "|") != strings.Join(want, "|") {
		t.Errorf("names %q, want %q", got.Phrases, want)
	}
	if got.Counts["Anna Weber"] != 2 || strings.Join(got.Ambiguous, ",") != "Will" {
		t.Errorf("counts %v, common first names %v", got.Counts, got.Ambiguous)
	}
	var gaz strings.Builder
	if err := got.WriteGazetteer(&gaz); err != nil {
		t.Fatal(err)
	}
	g, err := Read(strings.NewReader(gaz.String()), Source{Path: "names.tsv"})
	if err != nil || g.Report.Entries != 5 || g.Report.Types["PER"] != 5 {
		t.Errorf("the names as a gazetteer: %v %+v", err, g.Report)
	}
}

func TestReadNameListsErrors(t *testing.T) {
	for in, want := range map[string]string{
		"first\tJohn\nsurname\tSmith\n": `names.tsv:2: kind "surname"`,
		"first John\n":                  "names.tsv:1: want KIND<TAB>WORD",
		"title\tVice President\n":       "names.tsv:1: want KIND<TAB>WORD",
	} {
		var lists NameLists
		if err := ReadNameLists(strings.NewReader(in), "names.tsv", &lists); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", in, err, want)
		}
	}
}
