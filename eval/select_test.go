package eval

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/stages/stagestest"
	"github.com/nerflow/nerflow/storage/fsstore"
)

func TestSelectPrefersTheLaterOnATie(t *testing.T) {
	for _, c := range []struct {
		f1   []float64
		want int
	}{
		{[]float64{0.70, 0.74, 0.72}, 1},
		{[]float64{0.74, 0.70, 0.74}, 2}, // a tie: the later step
		{[]float64{0.70}, 0},
		{[]float64{0, 0}, 1},
	} {
		cands := make([]Candidate, len(c.f1))
		for i, f := range c.f1 {
			cands[i].F1 = f
		}
		if got := Select(cands); got != c.want {
			t.Errorf("Select(%v) = %d, want %d", c.f1, got, c.want)
		}
	}
}

// TestSelectStage keeps the model of the best dev report, its files
// unchanged, and reports every candidate.
func TestSelectStage(t *testing.T) {
	ctx := context.Background()
	st, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var models, reports []stages.Artifact
	for i, f1 := range []float64{0.72, 0.75, 0.71} {
		models = append(models, stagestest.ImportFiles(t, st, map[string][]byte{
			"tagger.json":        []byte(`{"seed":` + string(rune('1'+i)) + `}`),
			"lm.bin":             []byte{byte(i), 1, 2},
			"weights.safetensor": []byte{byte(i)},
		}))
		b, _ := json.Marshal(Report{Micro: Score{Precision: f1 + 0.01, Recall: f1 - 0.01, F1: f1}})
		reports = append(reports, stagestest.ImportFiles(t, st, map[string][]byte{"report.json": b}))
	}
	s, _ := stages.Lookup(StageSelect)
	exec := func(params map[string]any, ins map[string][]stages.Artifact) (map[string]stages.Artifact, error) {
		p, err := s.ResolveParams(params)
		if err != nil {
			t.Fatal(err)
		}
		return stages.Exec(ctx, s, stages.Env{Store: st, Params: p, Inputs: ins, OutputPrefix: "runs/select/" + stages.NewAttemptID()})
	}
	outs, err := exec(map[string]any{"names": []string{"seed 1", "seed 2", "student"}},
		map[string][]stages.Artifact{"models": models, "reports": reports})
	if err != nil {
		t.Fatal(err)
	}
	got, want := outs["model"], models[1]
	if len(got.Files) != len(want.Files) {
		t.Fatalf("chosen model has files %+v, want those of seed 2 %+v", got.Files, want.Files)
	}
	for i := range want.Files {
		if got.Files[i].Name != want.Files[i].Name || got.Files[i].Digest != want.Files[i].Digest {
			t.Errorf("file %d: %+v, want %+v (seed 2's)", i, got.Files[i], want.Files[i])
		}
	}
	if got.Kind != "checkpoint" || got.Meta["selected"] != "seed 2" {
		t.Errorf("model kind %q, meta %v: want a checkpoint selected = seed 2", got.Kind, got.Meta)
	}
	var sel Selection
	if err := stages.NewInput(ctx, st, outs["report"]).ReadJSON(SelectionFile, &sel); err != nil {
		t.Fatal(err)
	}
	if sel.Chosen != 1 || sel.Name != "seed 2" || len(sel.Candidates) != 3 || sel.Candidates[2].Name != "student" || sel.Candidates[0].Precision != 0.73 {
		t.Errorf("selection %+v", sel)
	}

	for _, c := range []struct {
		params map[string]any
		ins    map[string][]stages.Artifact
		want   string
	}{
		{nil, map[string][]stages.Artifact{"models": models, "reports": reports[:2]}, "3 models but 2 dev reports"},
		{map[string]any{"names": []string{"a"}}, map[string][]stages.Artifact{"models": models, "reports": reports}, "1 names for 3 models"},
	} {
		_, err := exec(c.params, c.ins)
		if err == nil || !stages.IsPermanent(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want a permanent error %q, got %v", c.want, err)
		}
	}
}
