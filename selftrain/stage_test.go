package selftrain

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/storage/fsstore"
	"github.com/nerflow/nerflow/train"
)

// TestStage runs selftrain.tagger on a file store, as the engine would:
// a tagger and a corpus in, a self-trained tagger that loads and a report
// out; with language models in too, the same on augmented sentences.
func TestStage(t *testing.T) {
	t.Run("originals", func(t *testing.T) { testStage(t, false) })
	t.Run("augmented", func(t *testing.T) { testStage(t, true) })
}

func testStage(t *testing.T, augmented bool) {
	ctx := context.Background()
	st, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	modelDir := t.TempDir()
	if err := tinyTagger(t).Save(modelDir); err != nil {
		t.Fatal(err)
	}
	model, err := stages.Import(ctx, st, "datasets", modelDir, "")
	if err != nil {
		t.Fatal(err)
	}
	textDir := t.TempDir()
	var b bytes.Buffer
	if err := corpus.Write(&b, fixtureCorpus(), corpus.FormatCoNLL); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(textDir, "train.conll"), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	text, err := stages.Import(ctx, st, "datasets", textDir, "")
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	s, _ := stages.Lookup(StageTagger)
	p, err := s.ResolveParams(map[string]any{"epochs": 2, "update_interval": 2, "entity_threshold": 0.6, "batch_size": 2, "learning_rate": 0.01})
	if err != nil {
		t.Fatal(err)
	}
	inputs := map[string][]stages.Artifact{"model": {model}, "corpus": {text}}
	if augmented {
		lmDir := t.TempDir()
		if err := tinyLM(t).Save(lmDir); err != nil {
			t.Fatal(err)
		}
		a, err := stages.Import(ctx, st, "datasets", lmDir, "")
		if err != nil {
			t.Fatal(err)
		}
		inputs["lm"] = []stages.Artifact{a}
	}
	outs, err := stages.Exec(ctx, s, stages.Env{Store: st, Params: p, Inputs: inputs, Log: log,
		OutputPrefix: "runs/selftrain/" + stages.NewAttemptID()})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := stages.NewInput(ctx, st, outs["model"]).Fetch(dir); err != nil {
		t.Fatal(err)
	}
	device, err := train.ParseDevice("cpu")
	if err != nil {
		t.Fatal(err)
	}
	m, err := train.Load(dir, device)
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	raw, err := stages.NewInput(ctx, st, outs["report"]).ReadFile("report.json")
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Result train.Result `json:"result"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Result.Epochs) != 2 {
		t.Errorf("report has %d epochs, want 2", len(rep.Result.Epochs))
	}
	if n := strings.Count(logs.String(), "augmented sentences"); augmented && n != 2 || !augmented && n != 0 {
		t.Errorf("augmented: %v, %d augmentations logged over 2 epochs", augmented, n)
	}
}
