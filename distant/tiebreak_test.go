package distant

import (
	"reflect"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/stages"
)

// The gazetteers of the Tie-or-Break tests: a typed core list (with a
// phrase of two tied types) and an untyped list of high-quality phrases, as
// BC5CDR's dict_core and dict_full.
func tieBreakGazetteers(t *testing.T) []*Gazetteer {
	core := gaz(t, 0, "Chemical\tlithium", "Chemical\tlithium carbonate", "Disease\theart failure",
		"Chemical,Disease\tlithium toxicity")
	full := gaz(t, 0, "tricuspid valve regurgitation", "carbonate toxicity", "heart failure")
	return []*Gazetteer{core, full}
}

// gapString renders gaps as one letter each: T tie, B break, U unknown.
func gapString(gaps []Boundary) string {
	var b strings.Builder
	for _, g := range gaps {
		b.WriteByte("TBU"[map[Boundary]int{Tie: 0, Break: 1, UnknownBoundary: 2}[g]])
	}
	return b.String()
}

func TestTieBreakLabels(t *testing.T) {
	for _, tc := range []struct {
		name     string
		opts     []Option
		sentence string
		gaps     string
		segments []Segment
		crossing int
	}{{
		// "lithium carbonate" wins over the crossing untyped "carbonate
		// toxicity" (leftmost of two equally long), whose disagreement
		// makes both gaps it touches unknown; every gap touching the
		// untyped "tricuspid valve regurgitation" is unknown; the other
		// unmatched tokens are None segments of one token.
		name:     "crossing and untyped",
		sentence: "lithium carbonate toxicity in a tricuspid valve regurgitation patient",
		gaps:     "UUBBUUUU",
		segments: []Segment{{0, 2, []string{"Chemical"}}, {2, 3, nil}, {3, 4, nil}, {4, 5, nil},
			{5, 8, []string{corpus.UnknownType}}, {8, 9, nil}},
		crossing: 2,
	}, {
		// The typed "heart failure" wins over its untyped copy; "lithium
		// toxicity" keeps both tied types, and the nested "lithium"
		// agrees with it.
		name:     "typed over untyped, type set",
		sentence: "heart failure after lithium toxicity",
		gaps:     "TBBT",
		segments: []Segment{{0, 2, []string{"Disease"}}, {2, 3, nil}, {3, 5, []string{"Chemical", "Disease"}}},
	}, {
		// Ambiguous phrases labeled O are no phrase, as in Label.
		name:     "ambiguous as O",
		opts:     []Option{WithAmbiguous(AsOutside)},
		sentence: "heart failure after lithium toxicity",
		gaps:     "TBBB",
		segments: []Segment{{0, 2, []string{"Disease"}}, {2, 3, nil}, {3, 4, nil}, {4, 5, nil}},
	}, {
		// Untyped phrases labeled O assert nothing, not even the
		// crossing.
		name:     "untyped as O",
		opts:     []Option{WithUntyped(AsOutside)},
		sentence: "lithium carbonate toxicity in a tricuspid valve regurgitation patient",
		gaps:     "TBBBBBBB",
		segments: []Segment{{0, 2, []string{"Chemical"}}, {2, 3, nil}, {3, 4, nil}, {4, 5, nil},
			{5, 6, nil}, {6, 7, nil}, {7, 8, nil}, {8, 9, nil}},
	}, {
		name:     "one token",
		sentence: "lithium",
		gaps:     "",
		segments: []Segment{{0, 1, []string{"Chemical"}}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			tb := matcher(t, tieBreakGazetteers(t), tc.opts...).NewTieBreaker()
			s := tb.Label(strings.Fields(tc.sentence))
			if got := gapString(s.Gaps); got != tc.gaps {
				t.Errorf("gaps %s, want %s", got, tc.gaps)
			}
			if !reflect.DeepEqual(s.Segments, tc.segments) {
				t.Errorf("segments %v, want %v", s.Segments, tc.segments)
			}
			r := tb.Report()
			if r.Crossing != tc.crossing || r.Ties+r.Breaks+r.Unknown != len(tc.gaps) {
				t.Errorf("report %+v", r)
			}
		})
	}
}

func TestTieBreakFormat(t *testing.T) {
	m := matcher(t, tieBreakGazetteers(t))
	c := &corpus.Corpus{Sentences: []corpus.Sentence{
		{Tokens: strings.Fields("lithium carbonate toxicity in tricuspid valve regurgitation")},
		{Tokens: strings.Fields("heart failure after lithium toxicity")},
	}}
	sents, r := m.TieBreak(c)
	if r.Sentences != 2 || r.Tokens != 12 || r.UnknownSegments != 1 ||
		!reflect.DeepEqual(r.Segments, map[string]int{"Chemical": 1, "Disease": 1, "Chemical,Disease": 1}) {
		t.Errorf("report %+v", r)
	}
	var b strings.Builder
	if err := WriteTieBreak(&b, sents); err != nil {
		t.Fatal(err)
	}
	want := `<s> O None S
lithium I Chemical S
carbonate O Chemical D
toxicity I None D
in I None S
tricuspid I ? D
valve O ? D
regurgitation O ? D
<eof> I None S

<s> O None S
heart I Disease S
failure O Disease S
after I None S
lithium I Chemical,Disease S
toxicity O Chemical,Disease S
<eof> I None S

`
	if b.String() != want {
		t.Errorf("written\n%s\nwant\n%s", b.String(), want)
	}
	back, err := ReadTieBreak(strings.NewReader(b.String()), "tb.ck")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, sents) {
		t.Errorf("read back %+v\nwant %+v", back, sents)
	}
}

func TestReadTieBreakErrors(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"<s> O None S\na I None\n", "tb.ck:2: 3 columns"},
		{"<s> O None S\na X None S\n", "tb.ck:2: boundary \"X\""},
		{"<s> O None S\na I None Q\n", "tb.ck:2: fourth column \"Q\""},
		{"<s> O None S\na O None S\n", "tb.ck:2: the first token"},
		{"<s> O None S\na I Chemical S\nb O Disease S\n", "tb.ck:3: O continues a segment of types \"Chemical\""},
		{"<s> O None S\na I None S\nb O None S\n", "tb.ck:3: O ties a token to a non-entity"},
		{"<s> O None S\na I ?,Chemical S\n", "tb.ck:2: types \"?,Chemical\""},
		{"a I None S\n", "tb.ck:1: token outside a sentence"},
		{"<s> O None S\na I None S\n\n", "tb.ck:3: blank line inside a sentence"},
		{"<s> O None S\na I None S\n", "tb.ck:2: the last sentence has no <eof>"},
		{"<s> O None S\n<eof> I None S\n", "tb.ck:2: <eof> ends no sentence"},
	} {
		_, err := ReadTieBreak(strings.NewReader(tc.text), "tb.ck")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.text, err, tc.want)
		}
	}
}

func TestWriteTieBreakErrors(t *testing.T) {
	for _, s := range []TieBreakSentence{
		{Tokens: []string{"a", "b"}, Segments: []Segment{{0, 2, []string{"X"}}}},                             // no gaps
		{Tokens: []string{"a"}, Segments: []Segment{{0, 1, []string{"None"}}}},                               // None as a type
		{Tokens: []string{"a"}, Segments: []Segment{{0, 1, []string{"?", "X"}}}},                             // ? in a set
		{Tokens: []string{"a", "b"}, Gaps: []Boundary{Break}, Segments: []Segment{{0, 1, nil}}},              // b not covered
		{Tokens: []string{"<eof>"}, Segments: []Segment{{0, 1, nil}}},                                        // a marker
		{Tokens: []string{"a", "b"}, Gaps: []Boundary{Break}, Segments: []Segment{{1, 2, nil}, {0, 1, nil}}}, // out of order
	} {
		if err := WriteTieBreak(&strings.Builder{}, []TieBreakSentence{s}); err == nil {
			t.Errorf("%+v written", s)
		}
	}
}

func TestTieBreakStage(t *testing.T) {
	ctx, st, imp := stageStore(t)
	text := imp("raw.conll", "lithium\ncarbonate\ntoxicity\n\nthe\nheart\nfailure\n", "corpus")
	core := imp("core.txt", "Chemical\tlithium carbonate\nDisease\theart failure\n", "gazetteer")
	full := imp("full.txt", "carbonate toxicity\nthe\n", "gazetteer") // "the" is a stopword
	stop := imp("stop.txt", "the\n", "stopwords")
	s, params := resolvedStage(t, StageTieBreak, map[string]any{"corpus_format": "conll"})
	outs, err := stages.Exec(ctx, s, stages.Env{
		Store: st, Params: params, OutputPrefix: "runs/1/tiebreak",
		Inputs: map[string][]stages.Artifact{"corpus": {text}, "gazetteers": {core, full}, "stopwords": {stop}},
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := stages.NewInput(ctx, st, outs["labeled"]).ReadFile(TieBreakFile)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadTieBreak(strings.NewReader(string(b)), TieBreakFile)
	if err != nil {
		t.Fatal(err)
	}
	// "carbonate toxicity" crosses "lithium carbonate": the gaps it
	// touches are unknown.
	if len(got) != 2 || gapString(got[0].Gaps) != "UU" || gapString(got[1].Gaps) != "BT" {
		t.Errorf("labels %+v", got)
	}
	var r TieBreakReport
	if err := stages.NewInput(ctx, st, outs["report"]).ReadJSON("report.json", &r); err != nil {
		t.Fatal(err)
	}
	if r.Sentences != 2 || r.Unknown != 2 || r.Crossing != 2 || len(r.Gazetteers) != 2 {
		t.Errorf("report %+v", r)
	}

	// A malformed gazetteer fails the node for good, naming file and line.
	bad := imp("bad.txt", "Chemical\tx\nnot typed\n", "gazetteer")
	_, err = stages.Exec(ctx, s, stages.Env{
		Store: st, Params: params, OutputPrefix: "runs/2/tiebreak",
		Inputs: map[string][]stages.Artifact{"corpus": {text}, "gazetteers": {bad}},
	})
	if err == nil || !stages.IsPermanent(err) || !strings.Contains(err.Error(), "bad.txt:2: no tab") {
		t.Errorf("bad gazetteer: %v", err)
	}
}
