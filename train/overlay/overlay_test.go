package overlay

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/dataset"
)

func sp(label string, start, end int) corpus.Span {
	return corpus.Span{Start: start, End: end, Label: label}
}

// Fill keeps every model entity and adds the overlay's that touch none;
// override the reverse. Overlap is sharing a token: nested and crossing
// spans overlap, touching ones do not, whatever their types.
func TestCombine(t *testing.T) {
	for _, c := range []struct {
		name                               string
		model, overlay                     []corpus.Span
		wantFill, wantOverride, wantExtend []corpus.Span
	}{
		{"disjoint", []corpus.Span{sp("PER", 0, 2)}, []corpus.Span{sp("LOC", 4, 5)},
			[]corpus.Span{sp("PER", 0, 2), sp("LOC", 4, 5)}, []corpus.Span{sp("PER", 0, 2), sp("LOC", 4, 5)}, []corpus.Span{sp("PER", 0, 2), sp("LOC", 4, 5)}},
		{"crossing", []corpus.Span{sp("PER", 1, 3)}, []corpus.Span{sp("ORG", 2, 5)},
			[]corpus.Span{sp("PER", 1, 3)}, []corpus.Span{sp("ORG", 2, 5)}, []corpus.Span{sp("ORG", 2, 5)}},
		// A wider model entity of another type does not extend the match.
		{"overlay nested in model", []corpus.Span{sp("ORG", 0, 4)}, []corpus.Span{sp("LOC", 1, 2)},
			[]corpus.Span{sp("ORG", 0, 4)}, []corpus.Span{sp("LOC", 1, 2)}, []corpus.Span{sp("LOC", 1, 2)}},
		// Of its type, it does: the gazetteer knew part of the name.
		{"overlay nested in model, same type", []corpus.Span{sp("PER", 0, 2)}, []corpus.Span{sp("PER", 0, 1)},
			[]corpus.Span{sp("PER", 0, 2)}, []corpus.Span{sp("PER", 0, 1)}, []corpus.Span{sp("PER", 0, 2)}},
		{"two overlay spans in one model span", []corpus.Span{sp("PER", 0, 3), sp("LOC", 6, 7)}, []corpus.Span{sp("PER", 0, 1), sp("PER", 2, 3), sp("ORG", 4, 5)},
			[]corpus.Span{sp("PER", 0, 3), sp("ORG", 4, 5), sp("LOC", 6, 7)},
			[]corpus.Span{sp("PER", 0, 1), sp("PER", 2, 3), sp("ORG", 4, 5), sp("LOC", 6, 7)},
			[]corpus.Span{sp("PER", 0, 3), sp("ORG", 4, 5), sp("LOC", 6, 7)}},
		// Holding one match but crossing another: the matches win.
		{"holds one, crosses another", []corpus.Span{sp("PER", 1, 5)}, []corpus.Span{sp("PER", 2, 3), sp("PER", 4, 6)},
			[]corpus.Span{sp("PER", 1, 5)}, []corpus.Span{sp("PER", 2, 3), sp("PER", 4, 6)}, []corpus.Span{sp("PER", 2, 3), sp("PER", 4, 6)}},
		{"model nested in overlay", []corpus.Span{sp("LOC", 1, 2)}, []corpus.Span{sp("ORG", 0, 4)},
			[]corpus.Span{sp("LOC", 1, 2)}, []corpus.Span{sp("ORG", 0, 4)}, []corpus.Span{sp("ORG", 0, 4)}},
		{"adjacent", []corpus.Span{sp("PER", 0, 2)}, []corpus.Span{sp("PER", 2, 3)},
			[]corpus.Span{sp("PER", 0, 2), sp("PER", 2, 3)}, []corpus.Span{sp("PER", 0, 2), sp("PER", 2, 3)}, []corpus.Span{sp("PER", 0, 2), sp("PER", 2, 3)}},
		{"same span, other type", []corpus.Span{sp("PER", 3, 4)}, []corpus.Span{sp("LOC", 3, 4)},
			[]corpus.Span{sp("PER", 3, 4)}, []corpus.Span{sp("LOC", 3, 4)}, []corpus.Span{sp("LOC", 3, 4)}},
		// One overlay span over two model entities: fill keeps both, override
		// drops both; the other model entity stays either way.
		{"one over two", []corpus.Span{sp("PER", 0, 1), sp("PER", 1, 2), sp("LOC", 5, 6)}, []corpus.Span{sp("ORG", 0, 2)},
			[]corpus.Span{sp("PER", 0, 1), sp("PER", 1, 2), sp("LOC", 5, 6)}, []corpus.Span{sp("ORG", 0, 2), sp("LOC", 5, 6)}, []corpus.Span{sp("ORG", 0, 2), sp("LOC", 5, 6)}},
		{"no model entities", nil, []corpus.Span{sp("LOC", 1, 2), sp("PER", 3, 5)},
			[]corpus.Span{sp("LOC", 1, 2), sp("PER", 3, 5)}, []corpus.Span{sp("LOC", 1, 2), sp("PER", 3, 5)}, []corpus.Span{sp("LOC", 1, 2), sp("PER", 3, 5)}},
		{"no overlay entities", []corpus.Span{sp("LOC", 1, 2)}, nil,
			[]corpus.Span{sp("LOC", 1, 2)}, []corpus.Span{sp("LOC", 1, 2)}, []corpus.Span{sp("LOC", 1, 2)}},
	} {
		for mode, want := range map[Mode][]corpus.Span{Fill: c.wantFill, Override: c.wantOverride, Extend: c.wantExtend} {
			if got := Combine(c.model, c.overlay, mode); !reflect.DeepEqual(got, want) {
				t.Errorf("%s: %s %v, want %v", c.name, mode, got, want)
			}
		}
	}
}

// fixed is an overlay that finds given spans wherever a sentence holds a
// token: the overlay's side of Apply without a matcher.
type fixed map[string][]corpus.Span

func (f fixed) Kind() string { return "fixed" }
func (f fixed) Spans(tokens []string) []corpus.Span {
	return f[strings.Join(tokens, " ")]
}
func (f fixed) Save(dir string) error { return nil }

// tagSet is the tags of scheme over types in the tagger's class order.
func tagSet(prefixes string, types ...string) []string {
	tags := []string{"O"}
	for _, typ := range types {
		for _, p := range prefixes {
			tags = append(tags, string(p)+"-"+typ)
		}
	}
	return tags
}

// uniformRows is a prediction's rows: each token's probability p on its
// tag and the rest spread evenly.
func rows(tags, set []string, p float32) [][]float32 {
	out := make([][]float32, len(tags))
	for i, tag := range tags {
		out[i] = make([]float32, len(set))
		for j := range set {
			out[i][j] = (1 - p) / float32(len(set)-1)
		}
		out[i][slices.Index(set, tag)] = p
	}
	return out
}

// Apply writes the combined entities in the tagger's scheme, and blends
// the rows of the tokens whose tags change half-and-half with the new tag:
// the row still sums to one and the new tag is its argmax.
func TestApplyBIO(t *testing.T) {
	set := tagSet("BI", "PER", "LOC")
	sent := "John Smith flew to New York and Paris"
	tokens := strings.Fields(sent)
	model := []string{"B-PER", "I-PER", "O", "O", "B-LOC", "O", "O", "O"}
	ov := fixed{sent: {sp("PER", 1, 2), sp("LOC", 4, 6), sp("LOC", 7, 8), sp("ORG", 3, 4)}}
	p := dataset.Prediction{Tags: model, Probs: rows(model, set, 0.8)}
	for _, c := range []struct {
		mode Mode
		want []string
	}{
		// fill: "Smith" and "New" are the model's; "Paris" is added; ORG is
		// no type of the tagger's.
		{Fill, []string{"B-PER", "I-PER", "O", "O", "B-LOC", "O", "O", "B-LOC"}},
		// override: "Smith" alone is a PER, "New York" a LOC; "John" no
		// longer overlaps a kept entity, but was part of the dropped one.
		{Override, []string{"O", "B-PER", "O", "O", "B-LOC", "I-LOC", "O", "B-LOC"}},
		// extend: as override, but the model's "John Smith" holds the
		// overlay's "Smith", of its type, and stays.
		{Extend, []string{"B-PER", "I-PER", "O", "O", "B-LOC", "I-LOC", "O", "B-LOC"}},
	} {
		a, err := Attach(ov, c.mode)
		if err != nil {
			t.Fatal(err)
		}
		got, err := a.Apply(corpus.BIO, []string{"PER", "LOC"}, set, tokens, p)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Tags, c.want) {
			t.Errorf("%s: tags %v, want %v", c.mode, got.Tags, c.want)
		}
		for tok, row := range got.Probs {
			k := slices.Index(set, got.Tags[tok])
			sum := float32(0)
			for _, v := range row {
				sum += v
			}
			if math.Abs(float64(sum-1)) > 1e-5 {
				t.Errorf("%s: token %d: row sums to %v", c.mode, tok, sum)
			}
			want := float32(0.8)
			if got.Tags[tok] != model[tok] {
				// The tagger gave the new tag 0.2/4; the overlay claims half.
				want = Weight + (1-Weight)*0.05
			}
			if math.Abs(float64(row[k]-want)) > 1e-6 {
				t.Errorf("%s: token %d (%s): p %v, want %v", c.mode, tok, got.Tags[tok], row[k], want)
			}
		}
		if &got.Probs[7][0] == &p.Probs[7][0] {
			t.Errorf("%s: the tagger's rows were written in place", c.mode)
		}
	}
	if p.Probs[0][slices.Index(set, "B-PER")] != 0.8 {
		t.Errorf("the input prediction changed: %v", p.Probs[0])
	}
}

// In IO an added entity touching a model entity of its type merges with
// it, as the scheme writes no boundary; touching one of another type it
// stays apart. A sentence the overlay leaves as it is keeps the tagger's
// very tags and rows.
func TestApplyIO(t *testing.T) {
	set := tagSet("I", "PER", "LOC")
	a, err := Attach(fixed{
		"a b c d": {sp("PER", 1, 2), sp("LOC", 2, 3)},
		"e f":     {sp("LOC", 0, 1)},
	}, Fill)
	if err != nil {
		t.Fatal(err)
	}
	model := []string{"I-PER", "O", "O", "I-PER"}
	got, err := a.Apply(corpus.IO, []string{"PER", "LOC"}, set, strings.Fields("a b c d"), dataset.Prediction{Tags: model, Probs: rows(model, set, 0.9)})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"I-PER", "I-PER", "I-LOC", "I-PER"}; !slices.Equal(got.Tags, want) {
		t.Errorf("tags %v, want %v", got.Tags, want)
	}
	same := []string{"I-LOC", "O"}
	p := dataset.Prediction{Tags: same, Probs: rows(same, set, 0.6)}
	got, err = a.Apply(corpus.IO, []string{"PER", "LOC"}, set, strings.Fields("e f"), p)
	if err != nil {
		t.Fatal(err)
	}
	if &got.Tags[0] != &p.Tags[0] || &got.Probs[0] != &p.Probs[0] {
		t.Errorf("an unchanged sentence got new tags or rows: %v", got)
	}
}

// With ModelTypes the tagger's entities of other types are dropped before
// combining, also in a sentence where the overlay finds nothing; the
// types are saved with the overlay (TestWriteRead reads them back).
func TestApplyModelTypes(t *testing.T) {
	set := tagSet("I", "PER", "LOC")
	a, err := Attach(fixed{"a b c d": {sp("LOC", 3, 4)}}, Override)
	if err != nil {
		t.Fatal(err)
	}
	a.ModelTypes = []string{"LOC"}
	checkApply(t, a, corpus.IO, set, []applyCase{
		{"a b c d", "I-PER I-LOC O O", "O I-LOC O I-LOC"},
		{"e f", "I-PER O", "O O"},
		{"g h", "I-LOC O", "I-LOC O"},
	})
	dir := t.TempDir()
	if err := a.Write(dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, Dir, File))
	if err != nil || !strings.Contains(string(b), `"model_types":["LOC"]`) {
		t.Fatalf("%s: %s (%v)", File, b, err)
	}
}

// applyCase is a sentence, the model's tags of it and the tags Apply
// should return.
type applyCase struct{ text, model, want string }

// checkApply applies a to each case's model tags (PER and LOC in set,
// the model 0.9 sure of each) and checks the combined tags.
func checkApply(t *testing.T, a *Attached, scheme corpus.Scheme, set []string, cases []applyCase) {
	t.Helper()
	for _, c := range cases {
		model := strings.Fields(c.model)
		got, err := a.Apply(scheme, []string{"PER", "LOC"}, set, strings.Fields(c.text), dataset.Prediction{Tags: model, Probs: rows(model, set, 0.9)})
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.Fields(c.want); !slices.Equal(got.Tags, want) {
			t.Errorf("%q: tags %v, want %v", c.text, got.Tags, want)
		}
	}
}

// A checkpoint without an overlay directory reads as none; one names its
// kind and mode, and a kind this build does not know is an error.
func TestWriteRead(t *testing.T) {
	dir := t.TempDir()
	if a, err := Read(dir); a != nil || err != nil {
		t.Fatalf("no overlay: %v, %v", a, err)
	}
	a, err := Attach(fixed{}, Override)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Write(dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, Dir, File))
	if err != nil || string(b) != fmt.Sprintf(`{"kind":"fixed","mode":"override","version":%d}`, Version) {
		t.Fatalf("%s: %s (%v)", File, b, err)
	}
	if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), `kind "fixed" is not registered`) {
		t.Errorf("unregistered kind: %v", err)
	}
	Register("fixed", func(string) (Overlay, error) { return fixed{}, nil })
	back, err := Read(dir)
	if err != nil || back.Mode != Override || back.Kind() != "fixed" || back.ModelTypes != nil {
		t.Errorf("read back %+v, %v", back, err)
	}
	a.ModelTypes = []string{"LOC", "MISC"}
	if err := a.Write(dir); err != nil {
		t.Fatal(err)
	}
	if back, err := Read(dir); err != nil || !slices.Equal(back.ModelTypes, a.ModelTypes) {
		t.Errorf("model types read back %+v, %v", back, err)
	}
	// No type at all is a choice too, not every type.
	a.ModelTypes = []string{}
	if err := a.Write(dir); err != nil {
		t.Fatal(err)
	}
	if back, err := Read(dir); err != nil || back.ModelTypes == nil || len(back.ModelTypes) != 0 {
		t.Errorf("no model type read back %+v, %v", back, err)
	}
	if _, err := Attach(fixed{}, "both"); err == nil {
		t.Error("mode both accepted")
	}
	// A checkpoint saved before versions reads; one from a newer build
	// says so instead of combining by rules it does not know.
	newer := fmt.Sprintf(`{"kind":"fixed","mode":"fill","version":%d}`, Version+1)
	for man, ok := range map[string]bool{`{"kind":"fixed","mode":"fill"}`: true, `{"kind":"fixed","mode":"fill","version":4}`: true, newer: false} {
		if err := os.WriteFile(filepath.Join(dir, Dir, File), []byte(man), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Read(dir)
		if ok != (err == nil) || (!ok && !strings.Contains(err.Error(), fmt.Sprintf("version %d", Version+1))) {
			t.Errorf("%s: %v", man, err)
		}
	}
}

// textual finds "Ann" wherever the text it is given for holds "Dr. Ann".
type textual struct{ known bool }

func (textual) Kind() string          { return "textual" }
func (textual) Save(dir string) error { return nil }
func (o textual) Spans(tokens []string) []corpus.Span {
	var out []corpus.Span
	for i, tok := range tokens {
		if o.known && tok == "Ann" {
			out = append(out, corpus.Span{Start: i, End: i + 1, Label: "PER"})
		}
	}
	return out
}
func (textual) ForText(sentences [][]string) (Overlay, error) {
	for _, s := range sentences {
		if slices.Contains(s, "Dr.") {
			return textual{known: true}, nil
		}
	}
	return textual{}, nil
}

// TestForText: an attached TextOverlay is specialized to the text, in its
// mode; any other overlay is itself.
func TestForText(t *testing.T) {
	a, err := Attach(textual{}, Fill)
	if err != nil {
		t.Fatal(err)
	}
	for text, want := range map[string]bool{"Dr. Ann came|Ann left": true, "Ann left": false} {
		var sentences [][]string
		for _, s := range strings.Split(text, "|") {
			sentences = append(sentences, strings.Fields(s))
		}
		b, err := a.ForText(sentences)
		if err != nil || b.Mode != Fill {
			t.Fatalf("%q: %+v, %v", text, b, err)
		}
		if got := len(b.Spans([]string{"Ann", "left"})) == 1; got != want {
			t.Errorf("%q: Ann found %v, want %v", text, got, want)
		}
	}
	plain, _ := Attach(fixed{}, Override)
	if b, err := plain.ForText(nil); b != plain || err != nil {
		t.Errorf("a plain overlay for a text: %+v, %v", b, err)
	}
}

// gated is fixed with a gate that admits one-token model entities, and
// entities of three tokens or more that hold an overlay entity, which they
// replace (the longer name).
type gated struct{ fixed }

func (g gated) Kind() string { return "gated" }

func (gated) Admit(tokens []string, own, model []corpus.Span) (admitted, kept []corpus.Span) {
	kept = own
	for _, e := range model {
		holds := func(sp corpus.Span) bool { return e.Start <= sp.Start && sp.End <= e.End }
		switch {
		case e.End-e.Start == 1:
			admitted = append(admitted, e)
		case e.End-e.Start >= 3 && slices.ContainsFunc(own, holds):
			admitted = append(admitted, e)
			kept = slices.DeleteFunc(slices.Clone(kept), holds)
		}
	}
	return admitted, kept
}

// A gated overlay lets only the model's entities its gate admits into the
// combination, also where the overlay itself finds nothing, and drops the
// overlay's entities the gate says an admitted one replaces; the gate is
// saved with the overlay, and an overlay without a gate cannot be gated.
func TestApplyGated(t *testing.T) {
	set := tagSet("BI", "PER", "LOC")
	a, err := Attach(gated{fixed{"a b c d": {sp("LOC", 3, 4)}, "j k l m": {sp("LOC", 1, 2)}}}, Override)
	if err != nil {
		t.Fatal(err)
	}
	a.Gated = true
	checkApply(t, a, corpus.BIO, set, []applyCase{
		{"a b c d", "B-PER I-PER B-PER O", "O O B-PER B-LOC"},
		{"e f g", "B-LOC I-LOC O", "O O O"}, // no overlay entity: the gate still applies
		{"h i", "B-PER O", "B-PER O"},
		{"j k l m", "B-PER I-PER I-PER O", "B-PER I-PER I-PER O"}, // the longer name holding the match k
		{"j k l m", "O B-PER I-PER O", "O B-LOC O O"},             // two tokens: not admitted, the match stays
	})
	dir := t.TempDir()
	if err := a.Write(dir); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, Dir, File)); err != nil || !strings.Contains(string(b), `"gated":true`) {
		t.Fatalf("%s: %s (%v)", File, b, err)
	}
	Register("gated", func(string) (Overlay, error) { return gated{}, nil })
	if back, err := Read(dir); err != nil || !back.Gated {
		t.Errorf("read back %+v, %v", back, err)
	}
	plain, err := Attach(fixed{}, Override)
	if err != nil {
		t.Fatal(err)
	}
	plain.Gated = true
	if err := plain.Write(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no gate") {
		t.Errorf("a gated overlay without a gate: %v", err)
	}
}
