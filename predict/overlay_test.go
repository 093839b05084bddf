package predict

import (
	"context"
	"strings"
	"testing"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/distant"
	"github.com/nerflow/nerflow/train/overlay"
)

// A served tagger whose checkpoint has a gazetteer overlay answers with
// the tagger's entities combined with the gazetteer's matches in the
// overlay's mode, says so in its info, and gives an entity that the
// overlay added a confidence of at least one half.
func TestServedOverlay(t *testing.T) {
	tg := tinyModel(t, 1)
	defer tg.Close()
	text := "John Smith flew to Springfield Heights on Monday."
	plain, err := NewModel(tg, Info{}).Annotate(Request{Texts: []string{text}}, 8)
	if err != nil {
		t.Fatal(err)
	}
	var model []corpus.Span
	for _, e := range plain.Results[0].Entities {
		model = append(model, corpus.Span{Start: e.TokenStart, End: e.TokenEnd, Label: e.Type})
	}
	// "Smith flew" crosses the PER the tiny model learned to find in
	// "John Smith"; "Springfield Heights" is a name it never saw.
	g, err := distant.Read(strings.NewReader("PER\tSmith flew\nLOC\tSpringfield Heights\n"), distant.Source{Path: "gaz.txt"})
	if err != nil {
		t.Fatal(err)
	}
	ov, err := distant.NewOverlay([]*distant.Gazetteer{g})
	if err != nil {
		t.Fatal(err)
	}
	matches := ov.Spans(strings.Fields("John Smith flew to Springfield Heights on Monday ."))
	if len(matches) != 2 {
		t.Fatalf("gazetteer matches %v", matches)
	}
	got := map[overlay.Mode]string{}
	for _, mode := range overlay.Modes {
		if err := tg.SetOverlay(ov, mode); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := tg.Save(dir); err != nil {
			t.Fatal(err)
		}
		m, err := LoadDir(dir, gotch.CPU, Info{Name: "tiny"})
		if err != nil {
			t.Fatal(err)
		}
		b := NewBatcher(m, Options{MaxBatch: 4})
		r, err := b.Predict(context.Background(), Request{Texts: []string{text}})
		b.Close()
		if err != nil {
			t.Fatal(err)
		}
		if r.Model.Overlay != string(mode) {
			t.Errorf("%s: model info %+v", mode, r.Model)
		}
		var spans []corpus.Span
		for _, e := range r.Results[0].Entities {
			sp := corpus.Span{Start: e.TokenStart, End: e.TokenEnd, Label: e.Type}
			spans = append(spans, sp)
			if !containsSpan(model, sp) && e.Confidence < overlay.Weight {
				t.Errorf("%s: added entity %+v has confidence %v", mode, e, e.Confidence)
			}
		}
		want := overlay.Combine(model, matches, mode)
		if spansOf(spans) != spansOf(want) {
			t.Errorf("%s: entities %v, want %v (tagger alone: %v)", mode, spans, want, model)
		}
		got[mode] = spansOf(spans)
	}
	// Where the tagger and the gazetteer disagree on a span, the modes
	// answer differently.
	overlaps := false
	for _, a := range model {
		for _, b := range matches {
			overlaps = overlaps || a.Start < b.End && b.Start < a.End && a != b
		}
	}
	if !overlaps {
		t.Logf("the tiny model's entities %v overlap no match: fill and override are not told apart", model)
	} else if got[overlay.Fill] == got[overlay.Override] {
		t.Errorf("fill and override agree: %s", got[overlay.Fill])
	}
}

func containsSpan(spans []corpus.Span, sp corpus.Span) bool {
	for _, s := range spans {
		if s == sp {
			return true
		}
	}
	return false
}

func spansOf(spans []corpus.Span) string {
	var parts []string
	for _, s := range spans {
		parts = append(parts, s.String())
	}
	return strings.Join(parts, " ")
}
