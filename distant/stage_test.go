package distant

import (
	"reflect"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/stages"
)

func TestStage(t *testing.T) {
	ctx, st, imp := stageStore(t)
	text := imp("raw.conll", "lithium\ncarbonate\ntoxicity\n\nno\nentity\nhere\n\nthe\nlithium\n", "corpus")
	gold := imp("gold.conll", "lithium B-Chemical\ntoxicity B-Disease\n", "corpus")
	core, err := stages.Import(ctx, st, "datasets", "testdata/core.txt", "gazetteer")
	if err != nil {
		t.Fatal(err)
	}
	chem := imp("chem.txt", "lithium\nthe\n", "gazetteer") // "the" is a stopword
	stop := imp("stop.txt", "the\n", "stopwords")

	s, ok := stages.Lookup(StageName)
	if !ok {
		t.Fatal("stage not registered")
	}
	// chem.txt's untyped "lithium" becomes a Chemical of higher priority,
	// which settles core.txt's Chemical/Disease tie.
	params, err := s.ResolveParams(map[string]any{
		"scheme": "bioes", "priorities": []any{0, 1}, "types": []any{"", "Chemical"}, "corpus_format": "conll",
	})
	if err != nil {
		t.Fatal(err)
	}
	outs, err := stages.Exec(ctx, s, stages.Env{
		Store: st, Params: params, OutputPrefix: "runs/1/distant",
		Inputs: map[string][]stages.Artifact{
			"corpus": {text}, "gazetteers": {core, chem}, "gold": {gold}, "stopwords": {stop},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	in := stages.NewInput(ctx, st, outs["labeled"])
	b, err := in.ReadFile("labeled.conll")
	if err != nil {
		t.Fatal(err)
	}
	c, err := corpus.Read(strings.NewReader(string(b)), "labeled.conll", corpus.FormatCoNLL)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"B-Chemical", "E-Chemical", "S-Disease"}, {"O", "O", "O"}, {"O", "S-Chemical"}}
	if got := tagsOf(c); !reflect.DeepEqual(got, want) {
		t.Errorf("tags %q, want %q", got, want)
	}
	if outs["labeled"].Meta["scheme"] != "bioes" {
		t.Errorf("meta %v", outs["labeled"].Meta)
	}
	var r Report
	if err := stages.NewInput(ctx, st, outs["report"]).ReadJSON("report.json", &r); err != nil {
		t.Fatal(err)
	}
	if r.Sentences != 3 || r.Matches["Chemical"] != 2 || r.Matches["Disease"] != 1 || r.AmbiguousMatches != 0 {
		t.Errorf("report %+v", r)
	}
	if r.Gold == nil || r.Gold.Report.Micro.F1 != 1 || r.Gold.Report.Micro.Support != 2 {
		t.Errorf("gold %+v", r.Gold)
	}
	if len(r.Gazetteers) != 2 || r.Gazetteers[1].Priority != 1 || r.Gazetteers[1].Types["Chemical"] != 2 {
		t.Errorf("gazetteers %+v", r.Gazetteers)
	}

	// A malformed gazetteer fails the node for good, naming file and line.
	bad := imp("bad.txt", "Chemical\tx\nnot typed\n", "gazetteer")
	_, err = stages.Exec(ctx, s, stages.Env{
		Store: st, Params: params, OutputPrefix: "runs/2/distant",
		Inputs: map[string][]stages.Artifact{"corpus": {text}, "gazetteers": {bad}},
	})
	if err == nil || !stages.IsPermanent(err) || !strings.Contains(err.Error(), "bad.txt:2: no tab") {
		t.Errorf("bad gazetteer: %v", err)
	}
}

// A mined gazetteer (input mined: names found in the corpus itself)
// labels the corpus as a gazetteer does, but only the given gazetteers'
// entries are appended as sentences of their own: the corpus holds every
// mined name already, with its context.
func TestStageMinedGivesNoEntrySentences(t *testing.T) {
	ctx, st, imp := stageStore(t)
	text := imp("raw.txt", "Barnett flew to Paris .\n", "corpus")
	places := imp("places.tsv", "LOC\tParis\nLOC\tBerlin\n", "gazetteer")
	names := imp("names.tsv", "PER\tBarnett\n", "gazetteer")
	s, params := resolvedStage(t, StageName, map[string]any{"scheme": "io", "entry_sentences": true, "entry_share": 0})
	label := func(inputs map[string][]stages.Artifact) []string {
		t.Helper()
		inputs["corpus"] = []stages.Artifact{text}
		outs, err := stages.Exec(ctx, s, stages.Env{Store: st, Params: params, OutputPrefix: "runs/" + stages.NewAttemptID() + "/label", Inputs: inputs})
		if err != nil {
			t.Fatal(err)
		}
		b, err := stages.NewInput(ctx, st, outs["labeled"]).ReadFile("labeled.conll")
		if err != nil {
			t.Fatal(err)
		}
		c, err := corpus.Read(strings.NewReader(string(b)), "labeled.conll", corpus.FormatCoNLL)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, s := range c.Sentences {
			got = append(got, strings.Join(s.Tokens, " ")+" "+strings.Join(s.Tags, " "))
		}
		return got
	}
	got := label(map[string][]stages.Artifact{"gazetteers": {places}, "mined": {names}})
	want := []string{"Barnett flew to Paris . I-PER O O I-LOC O", "Paris I-LOC", "Berlin I-LOC"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("mined names:\n got %q\nwant %q", got, want)
	}
	// The same list given as a gazetteer gives its entry sentence too.
	got = label(map[string][]stages.Artifact{"gazetteers": {places, names}})
	if want := append(want, "Barnett I-PER"); !reflect.DeepEqual(got, want) {
		t.Errorf("names as a gazetteer:\n got %q\nwant %q", got, want)
	}
}
