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

// TestTableStage gathers four reports into a 2 x 2 table, row by row, with
// the missampling rate of each training's last epoch.
func TestTableStage(t *testing.T) {
	ctx := context.Background()
	st, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	artifact := func(v any) stages.Artifact {
		b, _ := json.Marshal(v)
		return stagestest.ImportFiles(t, st, map[string][]byte{"report.json": b})
	}
	var reports, training []stages.Artifact
	for i, f1 := range []float64{0.80, 0.82, 0.50, 0.61} {
		reports = append(reports, artifact(Report{Micro: Score{Precision: f1, Recall: f1, F1: f1}}))
		training = append(training, artifact(map[string]any{"result": map[string]any{"epochs": []any{
			map[string]any{"missampling": 0.5}, map[string]any{"missampling": 0.01 * float64(i+1)}}}}))
	}
	s, _ := stages.Lookup(StageTable)
	exec := func(params map[string]any, ins map[string][]stages.Artifact) (map[string]stages.Artifact, error) {
		p, err := s.ResolveParams(params)
		if err != nil {
			t.Fatal(err)
		}
		return stages.Exec(ctx, s, stages.Env{Store: st, Params: p, Inputs: ins, OutputPrefix: "runs/table/" + stages.NewAttemptID()})
	}
	grid := map[string]any{"title": "masked", "row_key": "p", "rows": []string{"0.5", "0.9"}, "column_key": "sampling", "columns": []string{"uniform", "weighted"}}
	outs, err := exec(grid, map[string][]stages.Artifact{"reports": reports, "training": training})
	if err != nil {
		t.Fatal(err)
	}
	in := stages.NewInput(ctx, st, outs["table"])
	var tab Table
	if err := in.ReadJSON("table.json", &tab); err != nil {
		t.Fatal(err)
	}
	if c := tab.Cells[2]; c.Row != "0.9" || c.Column != "uniform" || c.F1 != 0.50 || c.Missampling == nil || *c.Missampling != 0.03 {
		t.Errorf("cell 3 %+v, want p 0.9, uniform, F1 0.50, missampling 0.03", c)
	}
	md, err := in.ReadFile("table.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"### masked", "| p \\ sampling | uniform | weighted |", "| 0.9 | 50.00 (3.00) | 61.00 (4.00) |"} {
		if !strings.Contains(string(md), line) {
			t.Errorf("table.md lacks %q:\n%s", line, md)
		}
	}

	// One column: a row per report, with precision and recall.
	outs, err = exec(map[string]any{"row_key": "sampling", "rows": []string{"a", "b", "c", "d"}}, map[string][]stages.Artifact{"reports": reports})
	if err != nil {
		t.Fatal(err)
	}
	md, _ = stages.NewInput(ctx, st, outs["table"]).ReadFile("table.md")
	if !strings.Contains(string(md), "| d | 61.00 | 61.00 | 61.00 |") {
		t.Errorf("one-column table.md:\n%s", md)
	}

	_, err = exec(grid, map[string][]stages.Artifact{"reports": reports[:3]})
	if err == nil || !stages.IsPermanent(err) || !strings.Contains(err.Error(), "3 reports for 2 rows x 2 columns") {
		t.Errorf("3 reports for a 2 x 2 table: %v", err)
	}
}
