package distant

import (
	"reflect"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/train/overlay"
)

// The training text of the first-word tests: "dealers" and "the" are
// written in lower case (twice or more) and never capitalized inside a
// sentence; "bush" once in lower case against twice capitalized; "green"
// twice in lower case and twice capitalized (not more often).
var firstWordText = sentences(
	"Dealers said the dealers sold the green bonds",
	"The dealers met Bush and Mr. Green",
	"Reporters asked Bush about a bush fire near Green Bay",
	"\" Bush said the green paint was dry",
)

func TestFirstWordsCountsTheTextsCommonWords(t *testing.T) {
	fw := NewFirstWords(firstWordText, 2)
	for w, want := range map[string]bool{"dealers": true, "the": true, "said": true, "green": false, "bush": false, "reporters": false, "bay": false} {
		if fw.words[w] != want {
			t.Errorf("%q common: %v, want %v", w, fw.words[w], want)
		}
	}
	if fw3 := NewFirstWords(firstWordText, 3); fw3.words["dealers"] || !fw3.words["the"] {
		t.Errorf("min_lower 3: dealers (2) %v, the (4) %v", fw3.words["dealers"], fw3.words["the"])
	}
}

// A tagger's entity that begins with a sentence's common first word loses
// it, or goes where it was that word alone; an acronym, a name the text
// capitalizes inside sentences, and entities further on stay.
func TestFirstWordsAdmit(t *testing.T) {
	fw := NewFirstWords(firstWordText, 2)
	org := func(start, end int) corpus.Span { return corpus.Span{Start: start, End: end, Label: "ORG"} }
	for _, c := range []struct {
		sentence    string
		model, want []corpus.Span
	}{
		{"Dealers said prices fell", []corpus.Span{org(0, 1)}, nil},
		{"The Bundesbank said", []corpus.Span{org(0, 2)}, []corpus.Span{org(1, 2)}},
		// The first word after a quote is the sentence's first word.
		{"\" Dealers said Reuters reported", []corpus.Span{org(1, 2), org(3, 4)}, []corpus.Span{org(3, 4)}},
		{"Bush said", []corpus.Span{org(0, 1)}, []corpus.Span{org(0, 1)}},
		{"Green Bay won", []corpus.Span{org(0, 2)}, []corpus.Span{org(0, 2)}},
		// Written in capitals, a word is an acronym.
		{"THE firm", []corpus.Span{org(0, 1)}, []corpus.Span{org(0, 1)}},
		// Only the first word: "the" inside a sentence is the model's.
		{"He met the Dealers", []corpus.Span{org(2, 4)}, []corpus.Span{org(2, 4)}},
		{"Dealers said", nil, nil},
	} {
		toks := strings.Fields(c.sentence)
		got, own := fw.Admit(toks, nil, c.model)
		if len(got) == 0 {
			got = nil // dropped, or none
		}
		if !reflect.DeepEqual(got, c.want) || own != nil {
			t.Errorf("%q: admitted %v (own %v), want %v", c.sentence, got, own, c.want)
		}
	}
	if got := fw.Spans(strings.Fields("Dealers said")); len(got) != 0 {
		t.Errorf("the gate finds entities of its own: %v", got)
	}
}

// Attached in mode fill and gated, saved into a checkpoint and read back,
// the gate rewrites a prediction's tags and leaves a sentence it does not
// touch as the tagger gave it.
func TestFirstWordsAttachedRoundTrips(t *testing.T) {
	a, err := overlay.Attach(NewFirstWords(firstWordText, 2), overlay.Fill)
	if err != nil {
		t.Fatal(err)
	}
	a.Gated = true
	dir := t.TempDir()
	if err := a.Write(dir); err != nil {
		t.Fatal(err)
	}
	back, err := overlay.Read(dir)
	if err != nil || back == nil || back.Kind() != FirstWordsKind || !back.Gated || back.Mode != overlay.Fill {
		t.Fatalf("read back: %+v, %v", back, err)
	}
	tags := []string{"O", "B-ORG", "I-ORG"}
	row := func(o, b, i float32) []float32 { return []float32{o, b, i} }
	pred := dataset.Prediction{Tags: []string{"B-ORG", "I-ORG", "O"}, Probs: [][]float32{row(0.2, 0.7, 0.1), row(0.1, 0.1, 0.8), row(0.9, 0.05, 0.05)}}
	got, err := back.Apply(corpus.BIO, []string{"ORG"}, tags, strings.Fields("The Bundesbank said"), pred)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"O", "B-ORG", "O"}; !reflect.DeepEqual(got.Tags, want) {
		t.Errorf("tags %v, want %v", got.Tags, want)
	}
	// The rewritten rows carry the overlay's weight on the new tag.
	if r := got.Probs[0]; r[0] < 0.5 || got.Probs[2][0] != 0.9 {
		t.Errorf("probabilities %v", got.Probs)
	}
	same, err := back.Apply(corpus.BIO, []string{"ORG"}, tags, strings.Fields("Bush said so"), pred)
	if err != nil || !reflect.DeepEqual(same, pred) {
		t.Errorf("untouched sentence: %+v, %v", same, err)
	}
}

// The stage attaches the gate to a checkpoint whose files stay as they
// were; a text whose entities begin in lower case gets the checkpoint as
// it came, its digest the same (so the model's evaluation serves from the
// cache); a checkpoint with an overlay, or no tagger, is refused.
func TestFirstWordsStage(t *testing.T) {
	ctx, st, imp := stageStore(t)
	model := importTagger(t, ctx, st)
	capitalized := imp("caps.conll", "Dealers O\nsaid O\nthe O\nBundesbank B-ORG\nsold O\n\nThe O\ndealers O\nmet O\nBush B-PER\n\nthe O\ndealers O\nleft O\n", "corpus")
	lower := imp("lower.conll", "Lithium B-Chemical\ncaused O\nthe O\ntoxicity B-Disease\n\nthe O\nlithium B-Chemical\ndose O\n\nthe O\nrats O\n", "corpus")
	s, ok := stages.Lookup(StageFirstWords)
	if !ok {
		t.Fatal("stage not registered")
	}
	run := func(prefix string, inputs map[string][]stages.Artifact) (stages.Artifact, error) {
		t.Helper()
		ps, err := s.ResolveParams(map[string]any{})
		if err != nil {
			t.Fatal(err)
		}
		outs, err := stages.Exec(ctx, s, stages.Env{Store: st, Params: ps, OutputPrefix: prefix, Inputs: inputs})
		return outs["model"], err
	}
	for _, c := range []struct {
		name  string
		text  stages.Artifact
		words int // 0: no gate
	}{{"capitalized", capitalized, 2}, {"lower case", lower, 0}} {
		out, err := run("runs/"+strings.ReplaceAll(c.name, " ", "-"), map[string][]stages.Artifact{"model": {model}, "text": {c.text}})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for _, f := range model.Files {
			if g, ok := out.File(f.Name); !ok || g.Digest != f.Digest {
				t.Errorf("%s: %s changed or missing", c.name, f.Name)
			}
		}
		dir := t.TempDir()
		if err := stages.NewInput(ctx, st, out).Fetch(dir); err != nil {
			t.Fatal(err)
		}
		a, err := overlay.Read(dir)
		if c.words == 0 {
			// "the" is common in the lower-case text too, but its names
			// are not capitalized.
			if err != nil || a != nil || out.Digest != model.Digest || out.Meta["gated"] != "" {
				t.Errorf("%s: overlay %+v (%v), digest %s of %s, meta %v: want the checkpoint as it came", c.name, a, err, out.Digest, model.Digest, out.Meta)
			}
			continue
		}
		if err != nil || a == nil || !a.Gated || a.Kind() != FirstWordsKind {
			t.Fatalf("%s: overlay %+v, %v", c.name, a, err)
		}
		// "the" and "dealers" in the capitalized text.
		if n := a.Overlay.(*FirstWords).Len(); n != c.words || out.Meta["gated"] != "first-words" {
			t.Errorf("%s: %d common words (meta %v), want %d", c.name, n, out.Meta, c.words)
		}
	}

	gated, err := run("runs/gated", map[string][]stages.Artifact{"model": {model}, "text": {capitalized}})
	if err != nil {
		t.Fatal(err)
	}
	notTagger := imp("model.bin", "x", "checkpoint")
	for _, c := range []struct {
		name  string
		model stages.Artifact
		want  string
	}{{"overlay already", gated, "has an overlay already"}, {"not a tagger", notTagger, "no tagger.json"}} {
		if _, err := run("runs/err", map[string][]stages.Artifact{"model": {c.model}, "text": {capitalized}}); err == nil || !stages.IsPermanent(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
