package crfvae

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/stages/stagestest"
	"github.com/nerflow/nerflow/storage/fsstore"
	"github.com/nerflow/nerflow/train/internal/traintest"
	"github.com/nerflow/nerflow/train/tagger"
)

// The stage trains on labeled and unlabeled artifacts of a file store, and
// its model is one train.evaluate scores.
func TestStageTrainsAModelEvaluateReads(t *testing.T) {
	ctx := context.Background()
	st, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var text, labels, raw strings.Builder
	for i, s := range traintest.Corpus(traintest.Fixture).Sentences {
		line := strings.Join(s.Tokens, " ") + "\n"
		raw.WriteString(line)
		if i < 5 {
			text.WriteString(line)
			labels.WriteString(strings.Join(s.Tags, " ") + "\n")
		}
	}
	data := stagestest.ImportFiles(t, st, map[string][]byte{"l_text.txt": []byte(text.String()), "l_label.txt": []byte(labels.String()), "raw.txt": []byte(raw.String())})
	exec := func(name string, params map[string]any, inputs map[string][]stages.Artifact) map[string]stages.Artifact {
		t.Helper()
		s, ok := stages.Lookup(name)
		if !ok {
			t.Fatalf("stage %s not registered", name)
		}
		p, err := s.ResolveParams(params)
		if err != nil {
			t.Fatal(err)
		}
		outs, err := stages.Exec(ctx, s, stages.Env{Store: st, Params: p, Inputs: inputs, OutputPrefix: "runs/" + name + "/" + stages.NewAttemptID()})
		if err != nil {
			t.Fatal(err)
		}
		return outs
	}
	outs := exec(StageName, map[string]any{
		"char_dim": 6, "char_filters": 8, "casing_dim": 4, "hidden": 10, "dropout": 0.1, "word_dim": 12,
		"epochs": 3, "batch_size": 4, "learning_rate": 0.02, "seed": 3, "min_word_count": 1,
		"generator": "transformer", "gen_dim": 8, "gen_vocab": 20,
		"corpus_file": "l_text.txt", "corpus_labels": "l_label.txt", "dev_file": "l_text.txt", "dev_labels": "l_label.txt",
		"unlabeled_file": "raw.txt",
	}, map[string][]stages.Artifact{"corpus": {data}, "dev": {data}, "unlabeled": {data}})
	b, err := stages.NewInput(ctx, st, outs["report"]).ReadFile("report.json")
	if err != nil {
		t.Fatal(err)
	}
	var report struct {
		Unlabeled      int    `json:"unlabeled"`
		GeneratedWords int    `json:"generated_words"`
		CRFVAE         Config `json:"crfvae"`
		Result         tagger.Result
	}
	if err := json.Unmarshal(b, &report); err != nil {
		t.Fatal(err)
	}
	if report.Unlabeled != 10 || report.GeneratedWords != 20 || report.CRFVAE.Generator != Transformer || len(report.Result.Epochs) != 3 {
		t.Errorf("report %s", b)
	}
	outs = exec(tagger.StageEvaluate, map[string]any{"gold_file": "l_text.txt", "gold_labels": "l_label.txt"},
		map[string][]stages.Artifact{"model": {outs["model"]}, "gold": {data}})
	if outs["report"].Meta["f1"] == "" {
		t.Errorf("evaluate meta %v", outs["report"].Meta)
	}
}
