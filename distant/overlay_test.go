package distant

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/corpus/corpustest"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/train/overlay"
)

// overlayGazetteers: a typed list at priority 0 ("lithium" tied between
// two types, "the" a stopword), a typed one at priority 1 and an untyped
// one whose long phrase keeps a shorter typed one out.
func overlayGazetteers(t *testing.T, opts ...Option) []*Gazetteer {
	t.Helper()
	var gs []*Gazetteer
	for _, g := range []struct {
		name, text string
		priority   int
	}{
		{"core.txt", "Chemical\tlithium\nChemical\tlithium carbonate\nDisease\theart failure\nDisease\ttoxicity\nDisease\tlithium\nChemical\tthe\n", 0},
		{"extra.txt", "Chemical\tclonidine\nChemical\ttoxicity\n", 1},
		{"full.txt", "congestive heart failure\n", 0},
	} {
		gz, err := Read(strings.NewReader(g.text), Source{Path: g.name, Priority: g.priority}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		gs = append(gs, gz)
	}
	return gs
}

var overlaySentences = []string{
	"congestive heart failure after lithium carbonate toxicity",
	"the lithium dose",
	"LITHIUM CARBONATE and Clonidine",
}

// typedSpans is what distant.label labels in a sentence, typed spans only.
func typedSpans(t *testing.T, m *Matcher, tokens []string) []corpus.Span {
	t.Helper()
	l, err := m.NewLabeler(corpus.BIO)
	if err != nil {
		t.Fatal(err)
	}
	tags, err := l.Label(tokens)
	if err != nil {
		t.Fatal(err)
	}
	spans, err := corpus.BIO.Spans(tags)
	if err != nil {
		t.Fatal(err)
	}
	var out []corpus.Span
	for _, sp := range spans {
		if sp.Label != corpus.UnknownType {
			out = append(out, sp)
		}
	}
	return out
}

// The overlay's entities of a sentence are distant.label's typed matches
// of it with the same gazetteers and options (priorities, case, stopwords,
// untyped phrases that keep shorter ones out), before and after a round
// trip through its files.
func TestOverlayIsTheLabelsTypedMatches(t *testing.T) {
	for _, c := range []struct {
		caseMode CaseMode
		want     [][]corpus.Span
	}{
		{CaseExact, [][]corpus.Span{
			// "heart failure" is inside the untyped phrase; "toxicity" is a
			// Chemical by priority.
			{{Start: 4, End: 6, Label: "Chemical"}, {Start: 6, End: 7, Label: "Chemical"}},
			nil, // "the" is a stopword, "lithium" ambiguous
			nil,
		}},
		{CaseVariants, [][]corpus.Span{
			{{Start: 4, End: 6, Label: "Chemical"}, {Start: 6, End: 7, Label: "Chemical"}},
			nil,
			{{Start: 0, End: 2, Label: "Chemical"}}, // UPPER is a variant, "Clonidine" is not
		}},
		{CaseFold, [][]corpus.Span{
			{{Start: 4, End: 6, Label: "Chemical"}, {Start: 6, End: 7, Label: "Chemical"}},
			nil,
			{{Start: 0, End: 2, Label: "Chemical"}, {Start: 3, End: 4, Label: "Chemical"}},
		}},
	} {
		opts := []Option{WithCase(c.caseMode), WithStopwords([]string{"the"})}
		gs := overlayGazetteers(t, opts...)
		ov, err := NewOverlay(gs, opts...)
		if err != nil {
			t.Fatal(err)
		}
		back := reloaded(t, ov)
		m := matcher(t, gs, opts...)
		for i, s := range overlaySentences {
			toks := strings.Fields(s)
			if got := ov.Spans(toks); !reflect.DeepEqual(got, c.want[i]) {
				t.Errorf("case %s, %q: spans %v, want %v", c.caseMode, s, got, c.want[i])
			}
			if got, labels := ov.Spans(toks), typedSpans(t, m, toks); !reflect.DeepEqual(got, labels) {
				t.Errorf("case %s, %q: spans %v, distant.label's %v", c.caseMode, s, got, labels)
			}
			if got := back.Spans(toks); !reflect.DeepEqual(got, c.want[i]) {
				t.Errorf("case %s, %q: loaded again, spans %v, want %v", c.caseMode, s, got, c.want[i])
			}
		}
	}
}

// A damaged entries file is an error naming its file and line.
func TestLoadOverlayErrors(t *testing.T) {
	ov, err := NewOverlay(overlayGazetteers(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := ov.Save(dir); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, overlayEntriesFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	if err := os.WriteFile(path, []byte(lines[0]+"{\"tokens\": [\"x\"\n"+strings.Join(lines[2:], "")), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOverlay(dir); err == nil || !strings.Contains(err.Error(), overlayEntriesFile+":2:") {
		t.Errorf("broken line 2: %v", err)
	}
	if err := os.WriteFile(path, []byte(lines[0]), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOverlay(dir); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("truncated: %v", err)
	}
}

// Mined entries are the labeled corpus's tagged phrases, each with its
// most frequent type; a tie makes the phrase ambiguous, which adds no
// entity, and spans of unknown type are no entries.
func TestMineEntries(t *testing.T) {
	c := corpustest.Inline(
		"aspirin/B-Chemical relieves pain/B-Disease",
		"aspirin/B-Disease for a cold/B-Disease",
		"aspirin/B-Chemical and cold/B-Chemical",
		"heart/I-Disease attack/I-Disease and foo/B-? bar/I-?",
	)
	g, err := MineEntries(c, "train")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range g.Entries {
		got = append(got, e.Type+":"+strings.Join(e.Tokens, " "))
	}
	want := []string{"Chemical:aspirin", "Disease:pain", "Chemical:cold", "Disease:cold", "Disease:heart attack"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("entries %v, want %v", got, want)
	}
	ov, err := NewOverlay([]*Gazetteer{g})
	if err != nil {
		t.Fatal(err)
	}
	spans := ov.Spans(strings.Fields("aspirin for a cold after a heart attack"))
	if want := []corpus.Span{{Start: 0, End: 1, Label: "Chemical"}, {Start: 6, End: 8, Label: "Disease"}}; !reflect.DeepEqual(spans, want) {
		t.Errorf("spans %v, want %v", spans, want)
	}

	c.Sentences = append(c.Sentences, corpus.Sentence{Tokens: []string{"untagged"}})
	if _, err := MineEntries(c, "train"); err == nil || !strings.Contains(err.Error(), "train: sentence 5 has no tags") {
		t.Errorf("untagged sentence: %v", err)
	}
}

// The stage adds overlay/ to a checkpoint whose files and metadata stay as
// they were, from the gazetteers or, without them, mined from the labeled
// corpus; a tagger loaded from it reads the overlay back in its mode.
func TestOverlayStage(t *testing.T) {
	ctx, st, imp := stageStore(t)
	model := importTagger(t, ctx, st)
	gaz := imp("gaz.txt", "Chemical\tlithium carbonate\nChemical\tthe\nDisease\ttoxicity\n", "gazetteer")
	stop := imp("stop.txt", "the\n", "stopwords")
	labeled := imp("labeled.conll", "lithium B-Chemical\ncarbonate I-Chemical\n\nthe B-Chemical\ntoxicity B-Disease\n", "corpus")
	s, ok := stages.Lookup(StageOverlay)
	if !ok {
		t.Fatal("stage not registered")
	}
	run := func(prefix string, params map[string]any, inputs map[string][]stages.Artifact) (stages.Artifact, error) {
		t.Helper()
		ps, err := s.ResolveParams(params)
		if err != nil {
			t.Fatal(err)
		}
		outs, err := stages.Exec(ctx, s, stages.Env{Store: st, Params: ps, OutputPrefix: prefix, Inputs: inputs})
		return outs["model"], err
	}
	sentence := strings.Fields("LITHIUM CARBONATE the toxicity")
	for _, c := range []struct {
		name   string
		params map[string]any
		inputs map[string][]stages.Artifact
		want   []corpus.Span
	}{
		{"gazetteers", map[string]any{"mode": "override", "case": "variants"},
			map[string][]stages.Artifact{"model": {model}, "gazetteers": {gaz}, "stopwords": {stop}, "labeled": {labeled}},
			[]corpus.Span{{Start: 0, End: 2, Label: "Chemical"}, {Start: 3, End: 4, Label: "Disease"}}},
		// Mined, "the" is a Chemical entry: the stopwords keep it out.
		{"mined", map[string]any{"mode": "fill", "case": "variants"},
			map[string][]stages.Artifact{"model": {model}, "stopwords": {stop}, "labeled": {labeled}},
			[]corpus.Span{{Start: 0, End: 2, Label: "Chemical"}, {Start: 3, End: 4, Label: "Disease"}}},
		{"mined, exact case", map[string]any{"mode": "fill"},
			map[string][]stages.Artifact{"model": {model}, "labeled": {labeled}},
			[]corpus.Span{{Start: 2, End: 3, Label: "Chemical"}, {Start: 3, End: 4, Label: "Disease"}}},
	} {
		out, err := run("runs/"+strings.ReplaceAll(c.name, " ", "-"), c.params, c.inputs)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for _, f := range model.Files {
			if g, ok := out.File(f.Name); !ok || g.Digest != f.Digest {
				t.Errorf("%s: %s changed or missing: %+v", c.name, f.Name, g)
			}
		}
		if out.Meta["overlay"] != c.params["mode"] || out.Kind != "checkpoint" {
			t.Errorf("%s: kind %s, meta %v", c.name, out.Kind, out.Meta)
		}
		dir := t.TempDir()
		if err := stages.NewInput(ctx, st, out).Fetch(dir); err != nil {
			t.Fatal(err)
		}
		a, err := overlay.Read(dir)
		if err != nil || a == nil {
			t.Fatalf("%s: reading the overlay: %v", c.name, err)
		}
		if string(a.Mode) != c.params["mode"] {
			t.Errorf("%s: mode %s", c.name, a.Mode)
		}
		if got := a.Spans(sentence); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: spans %v, want %v", c.name, got, c.want)
		}
	}

	// With the dev evaluation of the model under this overlay, its
	// entities are kept for the types where it reaches the labels' F1:
	// Chemical (above them) and Gene (which the labels never find), not
	// Disease (below them).
	devReport := imp("report.json", `{"micro":{"f1":0.8},"types":{"Chemical":{"f1":0.9},"Disease":{"f1":0.5},"Gene":{"f1":0.2}},`+
		`"baseline":{"micro":{"f1":0.75},"types":{"Chemical":{"f1":0.8},"Disease":{"f1":0.7}}}}`, "report")
	out, err := run("runs/typed", map[string]any{"mode": "override"}, map[string][]stages.Artifact{"model": {model}, "gazetteers": {gaz}, "dev_report": {devReport}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := stages.NewInput(ctx, st, out).Fetch(dir); err != nil {
		t.Fatal(err)
	}
	if a, err := overlay.Read(dir); err != nil || !reflect.DeepEqual(a.ModelTypes, []string{"Chemical", "Gene"}) || out.Meta["model_types"] != "Chemical,Gene" {
		t.Errorf("model types: %+v, %v, meta %v", a, err, out.Meta)
	}

	bad := imp("bad.txt", "Chemical\tx\nnot typed\n", "gazetteer")
	notTagger := imp("model.bin", "x", "checkpoint")
	noBaseline := imp("report.json", `{"micro":{"f1":0.8},"types":{"Chemical":{"f1":0.9}}}`, "report")
	for _, c := range []struct {
		name   string
		inputs map[string][]stages.Artifact
		want   string
	}{
		{"nothing to overlay", map[string][]stages.Artifact{"model": {model}}, "connect gazetteers, or the distantly labeled corpus"},
		{"bad gazetteer", map[string][]stages.Artifact{"model": {model}, "gazetteers": {bad}}, "bad.txt:2: no tab"},
		{"not a tagger", map[string][]stages.Artifact{"model": {notTagger}, "gazetteers": {gaz}}, "no tagger.json"},
		{"dev report without a baseline", map[string][]stages.Artifact{"model": {model}, "gazetteers": {gaz}, "dev_report": {noBaseline}}, "has no baseline"},
	} {
		_, err := run("runs/err", map[string]any{}, c.inputs)
		if err == nil || !stages.IsPermanent(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	if _, err := run("runs/err", map[string]any{"capitalized": true}, map[string][]stages.Artifact{"model": {model}, "gazetteers": {gaz}}); err == nil || !stages.IsPermanent(err) || !strings.Contains(err.Error(), "capitalized needs input names") {
		t.Errorf("capitalized without names: %v", err)
	}
}

// reloaded saves ov and loads it back, as a checkpoint's reader does.
func reloaded(t *testing.T, ov *GazetteerOverlay) overlay.Overlay {
	t.Helper()
	dir := t.TempDir()
	if err := ov.Save(dir); err != nil {
		t.Fatal(err)
	}
	back, err := LoadOverlay(dir)
	if err != nil {
		t.Fatal(err)
	}
	return back
}

// typedOverlay is the overlay of one typed gazetteer, TYPE<TAB>phrase lines.
func typedOverlay(t *testing.T, lines string) *GazetteerOverlay {
	t.Helper()
	g, err := Read(strings.NewReader(lines), Source{Path: "g.tsv"})
	if err != nil {
		t.Fatal(err)
	}
	ov, err := NewOverlay([]*Gazetteer{g})
	if err != nil {
		t.Fatal(err)
	}
	return ov
}

// TestOverlayFindsNamesInEachSentence: with name lists, the overlay adds the
// person names of the sentence it is given, resolved against the
// gazetteers' matches as distant.label resolves a names gazetteer: the
// longer phrase wins, the match on a tie; a first name that is a common
// word of the training text starts no name; and the lists survive a save.
func TestOverlayFindsNamesInEachSentence(t *testing.T) {
	ov := typedOverlay(t, "LOC\tParis\nLOC\tBrown\nORG\tJohn Smith Ltd\nLOC\tSmith\n")
	lists := NameLists{First: map[string]bool{"John": true, "Will": true}, Titles: map[string]bool{"Mr.": true}}
	ov.WithNames(lists, []string{"will", "county"}, 2)
	cases := []struct {
		sentence string
		want     []corpus.Span
	}{
		// John Smith (2 tokens) beats the match Smith (1); Mr. stays out
		// of Brown's name, which ties the LOC match Brown: the match wins.
		{"John Smith met Mr. Brown in Paris .", []corpus.Span{{Start: 0, End: 2, Label: "PER"}, {Start: 4, End: 5, Label: "LOC"}, {Start: 6, End: 7, Label: "LOC"}}},
		// The longer match John Smith Ltd keeps the name out.
		{"John Smith Ltd paid", []corpus.Span{{Start: 0, End: 3, Label: "ORG"}}},
		// Will is a common word of the training text; County ends a name.
		{"Will Jones saw John Fulton County", []corpus.Span{{Start: 3, End: 5, Label: "PER"}}},
	}
	loaded := reloaded(t, ov)
	for _, c := range cases {
		toks := strings.Fields(c.sentence)
		for name, o := range map[string]overlay.Overlay{"built": ov, "loaded": loaded} {
			if got := o.Spans(toks); !reflect.DeepEqual(got, c.want) {
				t.Errorf("%s, %q: %v, want %v", name, c.sentence, got, c.want)
			}
		}
	}
}

// TestOverlayNamesOfTheWholeText: ForText mines the names of all the
// sentences predicted together and matches them everywhere, so that a
// surname alone is found where another sentence names the person in
// full (Kennedy after a title, Weber after a first name); a first name common in the training text starts no name even in
// a one-sentence text; the overlay without name lists is itself.
func TestOverlayNamesOfTheWholeText(t *testing.T) {
	plain := typedOverlay(t, "LOC\tParis\n")
	if o, err := plain.ForText([][]string{{"Paris"}}); err != nil || o != overlay.Overlay(plain) {
		t.Fatalf("without names: %v, %v", o, err)
	}
	ov := typedOverlay(t, "LOC\tParis\n")
	ov.WithNames(NameLists{First: map[string]bool{"Anna": true, "Will": true}, Titles: map[string]bool{"Mr.": true}}, []string{"will"}, 2)
	text := [][]string{
		strings.Fields("Mr. Kennedy met Anna Weber in Paris ."),
		strings.Fields("Kennedy and Weber left ."),
		strings.Fields("Will Jones stayed ."),
	}
	o, err := ov.ForText(text)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]corpus.Span{
		{{Start: 1, End: 2, Label: "PER"}, {Start: 3, End: 5, Label: "PER"}, {Start: 6, End: 7, Label: "LOC"}},
		{{Start: 0, End: 1, Label: "PER"}, {Start: 2, End: 3, Label: "PER"}},
		nil,
	}
	for i, toks := range text {
		if got := o.Spans(toks); !reflect.DeepEqual(got, want[i]) {
			t.Errorf("sentence %d: %v, want %v", i+1, got, want[i])
		}
	}
	// Sentence by sentence, Kennedy alone is no name.
	if got := ov.Spans(text[1]); got != nil {
		t.Errorf("sentence 2 alone: %v, want no names", got)
	}
}

// TestOverlayAdmitsCapitalizedPhrases: the gate admits a model entity that
// is exactly a capitalized phrase between the overlay's entities, or holds
// a word that is not capitalized, and nothing else; the lists it needs are
// saved with the overlay, and ForText counts the text's lower-case words
// too.
func TestOverlayAdmitsCapitalizedPhrases(t *testing.T) {
	ov := typedOverlay(t, "LOC\tAtlanta\n")
	lists := NameLists{First: map[string]bool{}, Titles: map[string]bool{"Gov.": true}, Common: map[string]bool{"Monday": true}}
	ov.WithNames(lists, []string{"county"}, 2)
	toks := strings.Fields("Gov. Meyner spoke at Morris County Court in Atlanta on Monday to the Sons of Erin and Kegham .")
	own := ov.Spans(toks) // Meyner after the title, and Atlanta
	if want := []corpus.Span{{Start: 1, End: 2, Label: "PER"}, {Start: 8, End: 9, Label: "LOC"}}; !reflect.DeepEqual(own, want) {
		t.Fatalf("overlay spans %v, want %v", own, want)
	}
	sp := func(start, end int) corpus.Span { return corpus.Span{Start: start, End: end, Label: "ORG"} }
	model := []corpus.Span{sp(4, 5), sp(5, 6), sp(10, 11), sp(13, 16), sp(17, 18)} // Morris, County, Monday, Sons of Erin, Kegham
	whole := []corpus.Span{sp(4, 7), sp(13, 14), sp(15, 16)}                       // Morris County Court, Sons, Erin
	for name, o := range map[string]*GazetteerOverlay{"built": ov, "loaded": reloaded(t, ov).(*GazetteerOverlay)} {
		if got, _ := o.Admit(toks, own, model); !reflect.DeepEqual(got, []corpus.Span{sp(13, 16), sp(17, 18)}) {
			t.Errorf("%s: admitted %v, want Sons of Erin and Kegham", name, got)
		}
		if got, _ := o.Admit(toks, own, whole); !reflect.DeepEqual(got, whole) {
			t.Errorf("%s: admitted %v of the phrases %v", name, got, whole)
		}
	}
	// A text that writes "sons" in lower case twice: Sons is a common
	// word there, and no phrase.
	ft, err := ov.ForText([][]string{toks, strings.Fields("two sons and three sons")})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := ft.(*GazetteerOverlay).Admit(toks, own, whole); !reflect.DeepEqual(got, []corpus.Span{sp(4, 7), sp(15, 16)}) {
		t.Errorf("for the text: admitted %v, want Morris County Court and Erin", got)
	}
}

// TestOverlayAdmitsLongerNames: a model entity that is exactly a longer
// name holding the overlay's entities is admitted in their place; one that
// is a part of the longer name is not, and they stay.
func TestOverlayAdmitsLongerNames(t *testing.T) {
	ov := typedOverlay(t, "LOC\tAtlanta\n")
	ov.WithNames(NameLists{First: map[string]bool{}}, nil, 2)
	toks := strings.Fields("members of the Atlanta Heights Club met")
	own := ov.Spans(toks)
	org := func(start, end int) corpus.Span { return corpus.Span{Start: start, End: end, Label: "ORG"} }
	admitted, kept := ov.Admit(toks, own, []corpus.Span{org(3, 6)})
	if !reflect.DeepEqual(admitted, []corpus.Span{org(3, 6)}) || len(kept) != 0 {
		t.Errorf("the longer name: admitted %v, kept %v", admitted, kept)
	}
	admitted, kept = ov.Admit(toks, own, []corpus.Span{org(4, 6)})
	if len(admitted) != 0 || !reflect.DeepEqual(kept, own) {
		t.Errorf("a part of it: admitted %v, kept %v of %v", admitted, kept, own)
	}
}
