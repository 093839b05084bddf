package tagger

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/distant"
	"github.com/nerflow/nerflow/train/overlay"
)

// A tagger saved with a gazetteer overlay loads with it, by Load and by
// LoadModel alike, and predicts the gazetteer's entities combined with its
// own; saved again, it keeps the overlay. The compat tagger (trained
// before overlays existed) tags every token of the fixture O, so in
// either mode its predictions become the gazetteer's matches, with the
// rows of the changed tokens blended half-and-half.
func TestTaggerWithOverlay(t *testing.T) {
	plain, err := Load(filepath.Join("testdata", "compat", "tagger"), gotch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if plain.OverlayMode() != "" {
		t.Fatalf("a checkpoint without %s/ loaded with overlay mode %q", overlay.Dir, plain.OverlayMode())
	}
	c := fixtureCorpus(fixture)
	before, err := plain.Predict(c, 4)
	if err != nil {
		t.Fatal(err)
	}
	// ORG is no type of the tagger's: it is never written.
	g, err := distant.Read(strings.NewReader("PER\tJohn Smith\nLOC\tParis\nLOC\tRome\nORG\tCarlos Ruiz\n"), distant.Source{Path: "gaz.txt"})
	if err != nil {
		t.Fatal(err)
	}
	ov, err := distant.NewOverlay([]*distant.Gazetteer{g})
	if err != nil {
		t.Fatal(err)
	}
	if err := plain.SetOverlay(ov, "both"); err == nil {
		t.Fatal("mode both accepted")
	}
	want := map[int][]string{
		0: {"B-PER", "I-PER", "O", "O", "B-LOC", "O"},   // John Smith lives in Paris .
		2: {"O", "O", "O", "B-LOC", "O", "O", "O", "O"}, // The mayor of Rome met Anna Weber .
		5: {"O", "O", "B-LOC", "O", "O", "O"},           // Berlin and Paris are cities .
		6: {"O", "O", "B-LOC", "O"},                     // Anna likes Rome .
	}
	for _, mode := range overlay.Modes {
		if err := plain.SetOverlay(ov, mode); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := plain.Save(dir); err != nil {
			t.Fatal(err)
		}
		m, err := Load(dir, gotch.CPU)
		if err != nil {
			t.Fatal(err)
		}
		if m.OverlayMode() != mode {
			t.Errorf("%s: loaded with mode %q", mode, m.OverlayMode())
		}
		p, err := LoadModel(dir, gotch.CPU)
		if err != nil {
			t.Fatal(err)
		}
		for _, pr := range []Predictor{m, p} {
			got, err := pr.Predict(c, 4)
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range got {
				w, ok := want[i]
				if !ok {
					w = before[i].Tags
				}
				if !slices.Equal(s.Tags, w) {
					t.Errorf("%s: sentence %d: tags %v, want %v", mode, i+1, s.Tags, w)
				}
				for tok, tag := range s.Tags {
					k, _ := plain.Labels.Index(tag)
					wantP := before[i].Probs[tok][k]
					if tag != before[i].Tags[tok] {
						wantP = overlay.Weight + (1-overlay.Weight)*wantP
					}
					if s.Probs[tok][k] != wantP {
						t.Errorf("%s: sentence %d, token %d: p(%s) %v, want %v", mode, i+1, tok+1, tag, s.Probs[tok][k], wantP)
					}
				}
			}
		}
		// Saved again (as a training that started from it would), the
		// checkpoint still holds the overlay.
		again := t.TempDir()
		if err := m.Save(again); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(again, overlay.Dir, overlay.File)); err != nil {
			t.Errorf("%s: saved again without the overlay: %v", mode, err)
		}
		m.Close()
		p.Close()
	}

	// A checkpoint naming an overlay kind this build lacks does not load.
	dir := t.TempDir()
	if err := plain.Save(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, overlay.Dir, overlay.File), []byte(`{"kind":"regex","mode":"fill"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir, gotch.CPU); err == nil || !strings.Contains(err.Error(), `kind "regex" is not registered`) {
		t.Errorf("unknown kind: %v", err)
	}
}
