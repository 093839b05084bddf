package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTrainCommand(t *testing.T) {
	text := "John lives in Paris .\nMary visited Berlin .\nPeter flew to London .\nAnna likes Rome .\n"
	labels := "B-PER O O B-LOC O\nB-PER O B-LOC O\nB-PER O O B-LOC O\nB-PER O B-LOC O\n"
	dir := writeFiles(t, map[string]string{
		"text.txt": text, "labels.txt": labels,
		"bad.txt":   "B-PER O\n", // one sentence, two tags: misaligned with text.txt
		"wink.json": `{"dimensions":3,"wordIndex":4,"vectors":{"paris":[1,0,0,1,0],"berlin":[0,1,0,1,1]}}`,
	})
	out := filepath.Join(dir, "model")
	args := []string{"train", "--train-text", filepath.Join(dir, "text.txt"), "--train-labels", filepath.Join(dir, "labels.txt"),
		"--dev-text", filepath.Join(dir, "text.txt"), "--dev-labels", filepath.Join(dir, "labels.txt"),
		"--vectors", filepath.Join(dir, "wink.json"), "--hidden", "8", "--char-filters", "4", "--epochs", "3",
		"--batch-size", "2", "--lr", "0.002", "--out", out, "--log-level", "error"} // --lr: the old name of --learning-rate
	stdout, err := runCLI(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout, "micro avg") {
		t.Errorf("no dev scores in the output:\n%s", stdout)
	}
	for _, f := range []string{"tagger.json", "weights.pt", "report.json"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	var report struct {
		Result struct{ Epochs []json.RawMessage }
	}
	b, _ := os.ReadFile(filepath.Join(out, "report.json"))
	if err := json.Unmarshal(b, &report); err != nil || len(report.Result.Epochs) != 3 {
		t.Errorf("report: %v, %d epochs", err, len(report.Result.Epochs))
	}

	// The span head with negative sampling, its missampling rate against
	// the labels as the complete annotation of a copy that lost them.
	partial := filepath.Join(dir, "partial.txt")
	if err := os.WriteFile(partial, []byte("B-PER O O O O\nB-PER O B-LOC O\nO O O B-LOC O\nB-PER O B-LOC O\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	span := append(append([]string{}, args...), "--train-labels", partial, "--complete-text", filepath.Join(dir, "text.txt"),
		"--complete-labels", filepath.Join(dir, "labels.txt"), "--head", "span", "--loss", "negsample", "--sampling", "weighted", "--scheme", "bio")
	if _, err := runCLI(t, span...); err != nil {
		t.Fatal(err)
	}
	var spanReport struct {
		Result struct {
			Epochs []struct{ Missampling *float64 }
		}
	}
	b, _ = os.ReadFile(filepath.Join(out, "report.json"))
	if err := json.Unmarshal(b, &spanReport); err != nil || len(spanReport.Result.Epochs) != 3 || spanReport.Result.Epochs[0].Missampling == nil {
		t.Errorf("span report: %v, %s", err, b)
	}

	bad := append(append([]string{}, args...), "--dropout", "0.99")
	if _, err := runCLI(t, bad...); err == nil || !strings.Contains(err.Error(), "dropout") {
		t.Errorf("dropout out of range: %v", err)
	}

	args[4] = filepath.Join(dir, "bad.txt")
	if _, err := runCLI(t, args...); err == nil || !strings.Contains(err.Error(), "bad.txt") {
		t.Errorf("misaligned labels: %v", err)
	}
}
