package distant

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/storage"
	"github.com/nerflow/nerflow/storage/fsstore"
)

func TestMineNames(t *testing.T) {
	var lists NameLists
	err := ReadNameLists(strings.NewReader("# lists\nfirst\tJohn\nfirst\tAnna\nfirst\tWill\nfirst\tSam\n\ntitle\tSen.\ntitle\tVice\ntitle\tPresident\ntitle\tMrs.\n"), "names.tsv", &lists)
	if err != nil {
		t.Fatal(err)
	}
	places, err := Read(strings.NewReader("LOC\tHouston\nLOC\tNew York\n"), Source{Path: "places.tsv", Format: FormatTyped})
	if err != nil {
		t.Fatal(err)
	}
	lists.DropTypedOtherwise([]*Gazetteer{places})
	c := &corpus.Corpus{}
	for _, s := range []string{
		"Appointment of John F. Tims Jr. , 41 , was announced .",
		"Sen. Kennedy met Vice President Johnson and Mrs. Anna Weber in Boston .",
		"Will Congress act ? It will , and it will soon .", // Will is a common word here
		"John said that John F. was late .",                // no surname after the initial
		"Anna Weber spoke ; Mrs. and JOHN SMITH did not .",
		"John Fulton County Court said the county court and the county jail were full .", // County and Court are common words
		"Sam Houston and Mrs. Weber came .",                                              // Houston is a place alone; Weber is found already
		"Anna lives on Sam Street , a quiet street .",                                    // the text writes street as a word
	} {
		c.Sentences = append(c.Sentences, corpus.Sentence{Tokens: strings.Fields(s)})
	}
	got := MineNames(c, lists, 2)
	want := []string{"John F. Tims Jr.", "Kennedy", "Johnson", "Anna Weber", "John Fulton", "Sam Houston", "Weber", "Sam Street"}
	if strings.Join(got.Phrases, "|") != strings.Join(want, "|") {
		t.Errorf("names %q, want %q", got.Phrases, want)
	}
	// The last word of a name of two words or more, after suffixes and
	// initials; not a word a gazetteer types otherwise, nor one the text
	// writes in lower case, nor one found as a name already.
	if want := []string{"Tims", "Fulton"}; !reflect.DeepEqual(got.Surnames, want) {
		t.Errorf("surnames %q, want %q", got.Surnames, want)
	}
	if got.Counts["Anna Weber"] != 2 || strings.Join(got.Ambiguous, ",") != "Will" {
		t.Errorf("counts %v, common first names %v", got.Counts, got.Ambiguous)
	}
	g, err := got.Gazetteer("names.tsv")
	if err != nil || g.Report.Entries != 10 || g.Report.Types["PER"] != 10 {
		t.Errorf("the names as a gazetteer: %v %+v", err, g.Report)
	}
}

func TestReadNameListsErrors(t *testing.T) {
	for in, want := range map[string]string{
		"first\tJohn\nsurname\tSmith\n":    `names.tsv:2: kind "surname"`,
		"first John\n":                     "names.tsv:1: want KIND<TAB>WORD",
		"title\tVice President\n":          "names.tsv:1: want KIND<TAB>WORD",
		"head:\tClub\n":                    `names.tsv:1: kind "head:": want head:TYPE`,
		"head:?\tClub\n":                   `names.tsv:1: kind "head:?": want head:TYPE`,
		"head:ORG\tClub\nhead:LOC\tClub\n": `names.tsv:2: head word "Club" of type LOC was given type ORG before`,
	} {
		var lists NameLists
		if err := ReadNameLists(strings.NewReader(in), "names.tsv", &lists); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", in, err, want)
		}
	}
}

// The stage reads name lists, leaves out a first name that a typed
// gazetteer lists as one word of another type (Georgia as LOC), and writes
// the names it finds as a PER gazetteer with a report; a malformed list is
// a permanent error naming its line.
func TestNamesStage(t *testing.T) {
	ctx, st, imp := stageStore(t)
	text := imp("raw.txt", "Georgia Tech beat Anna Weber 's team .\nMr. Smith and Georgia Brown met .\n", "corpus")
	lists := imp("names.tsv", "first\tAnna\nfirst\tGeorgia\ntitle\tMr.\n", "names")
	gaz := imp("gaz.tsv", "LOC\tGeorgia\n", "gazetteer")
	s, params := resolvedStage(t, StageNames, map[string]any{})
	run := func(inputs map[string][]stages.Artifact) (map[string]stages.Artifact, error) {
		return stages.Exec(ctx, s, stages.Env{Store: st, Params: params, OutputPrefix: "runs/1/names", Inputs: inputs})
	}
	outs, err := run(map[string][]stages.Artifact{"corpus": {text}, "names": {lists}, "gazetteers": {gaz}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := stages.NewInput(ctx, st, outs["gazetteer"]).ReadFile("names.tsv")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "PER\tAnna Weber\nPER\tSmith\nPER\tWeber\n" {
		t.Errorf("names.tsv:\n%s", got)
	}
	var rep namesReport
	if err := stages.NewInput(ctx, st, outs["report"]).ReadJSON("report.json", &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Names != 2 || rep.Surnames != 1 || rep.Mentions != 2 || !reflect.DeepEqual(rep.Excluded, []string{"Georgia"}) {
		t.Errorf("report %+v", rep)
	}
	bad := imp("bad.tsv", "first\tAnna\nlast\tWeber\n", "names")
	if _, err := run(map[string][]stages.Artifact{"corpus": {text}, "names": {bad}}); err == nil || !stages.IsPermanent(err) || !strings.Contains(err.Error(), "bad.tsv:2") {
		t.Errorf("a malformed list: %v", err)
	}
}

// resolvedStage returns the registered stage name and raw resolved as its
// params, failing the test where either is missing or invalid.
func resolvedStage(t *testing.T, name string, raw map[string]any) (*stages.Stage, stages.Params) {
	t.Helper()
	s, ok := stages.Lookup(name)
	if !ok {
		t.Fatalf("stage %s not registered", name)
	}
	params, err := s.ResolveParams(raw)
	if err != nil {
		t.Fatal(err)
	}
	return s, params
}

// stageStore returns a file store for a stage test and a function that
// imports a file of the given content into it as an artifact of kind.
func stageStore(t *testing.T) (context.Context, storage.Store, func(name, content, kind string) stages.Artifact) {
	ctx := context.Background()
	st, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	return ctx, st, func(name, content, kind string) stages.Artifact {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		a, err := stages.Import(ctx, st, "datasets", p, kind)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
}

// importTagger imports into st a checkpoint that the overlay stages take
// for a tagger: tagger.json and weights, which they copy and never load.
func importTagger(t *testing.T, ctx context.Context, st storage.Store) stages.Artifact {
	t.Helper()
	dir := t.TempDir()
	for name, content := range map[string]string{"tagger.json": `{"format":2}`, "weights.pt": "weights"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	model, err := stages.Import(ctx, st, "datasets", dir, "checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	return model
}

// A head word of another type than PER ends a name: a first name before
// it names a place, not a person, in mining and in a saved overlay alike.
func TestNamesEndAtHeadWords(t *testing.T) {
	lists := NameLists{First: map[string]bool{"Morris": true}, Titles: map[string]bool{}, Heads: map[string]string{"County": "LOC"}}
	c := sentences("Morris County voted and Morris Smith spoke")
	if got := MineNames(c, lists, 2).Phrases; !reflect.DeepEqual(got, []string{"Morris Smith"}) {
		t.Errorf("names %q, want Morris Smith alone", got)
	}
	ov := typedOverlay(t, "LOC\tAtlanta\n")
	ov.WithNames(lists, nil, 2)
	for name, o := range map[string]*GazetteerOverlay{"built": ov, "loaded": reloaded(t, ov).(*GazetteerOverlay)} {
		if got := o.Spans(strings.Fields("Morris County voted")); len(got) != 0 {
			t.Errorf("%s: %v in Morris County voted", name, got)
		}
	}
}
