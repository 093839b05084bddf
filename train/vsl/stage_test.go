package vsl

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/embeddings"
	"github.com/nerflow/nerflow/eval"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/stages/stagestest"
	"github.com/nerflow/nerflow/storage/fsstore"
	"github.com/nerflow/nerflow/train/internal/traintest"
	"github.com/nerflow/nerflow/train/tagger"
)

// TestStagesTrainPredictEvaluate runs the stages as the engine does, on a
// file store: train.vsl on the fixture's first sentences labeled and the
// rest as unlabeled text, train.predict on the fixture (the model kind vsl registers), and train.evaluate on
// the predictions, which scores what the model predicts.
func TestStagesTrainPredictEvaluate(t *testing.T) {
	ctx := context.Background()
	st, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := traintest.Corpus(traintest.Fixture)
	var text, labels, unlabeled strings.Builder
	for i, s := range c.Sentences {
		text.WriteString(strings.Join(s.Tokens, " ") + "\n")
		labels.WriteString(strings.Join(s.Tags, " ") + "\n")
		if i >= 6 {
			unlabeled.WriteString(strings.Join(s.Tokens, " ") + "\n")
		}
	}
	var vectors bytes.Buffer
	if err := embeddings.Write(&vectors, fixtureTable(t)); err != nil {
		t.Fatal(err)
	}
	data := stagestest.ImportFiles(t, st, map[string][]byte{"text.txt": []byte(text.String()), "labels.txt": []byte(labels.String()), "unlabeled.txt": []byte(unlabeled.String())})
	emb := stagestest.ImportFiles(t, st, map[string][]byte{embeddings.FileName: vectors.Bytes()})
	exec := func(name string, params map[string]any, inputs map[string][]stages.Artifact) (map[string]stages.Artifact, error) {
		s, ok := stages.Lookup(name)
		if !ok {
			t.Fatalf("stage %s not registered", name)
		}
		p, err := s.ResolveParams(params)
		if err != nil {
			t.Fatal(err)
		}
		return stages.Exec(ctx, s, stages.Env{Store: st, Params: p, Inputs: inputs, OutputPrefix: "runs/" + name + "/" + stages.NewAttemptID()})
	}
	read := func(a stages.Artifact, name string) []byte {
		b, err := stages.NewInput(ctx, st, a).ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	params := map[string]any{"variant": "flat", "hidden": 8, "y_dim": 4, "z_dim": 4, "char_dim": 4, "char_filters": 4, "recon_words": 20,
		"epochs": 3, "batch_size": 4, "kl_warmup": 5, "corpus_file": "text.txt", "corpus_labels": "labels.txt",
		"unlabeled_file": "unlabeled.txt", "dev_file": "text.txt", "dev_labels": "labels.txt"}
	outs, err := exec(StageTrain, params, map[string][]stages.Artifact{"corpus": {data}, "unlabeled": {data}, "dev": {data}, "embeddings": {emb}})
	if err != nil {
		t.Fatal(err)
	}
	var report struct {
		Labeled, Unlabeled int
		Result             Result
	}
	if err := json.Unmarshal(read(outs["report"], "report.json"), &report); err != nil {
		t.Fatal(err)
	}
	if report.Labeled != 10 || report.Unlabeled != 4 || len(report.Result.Epochs) != 3 || report.Result.BestEpoch == 0 || report.Result.Epochs[0].Unlabeled == 0 {
		t.Fatalf("report %+v", report)
	}
	if v := outs["model"].Meta["variant"]; v != "flat" {
		t.Errorf("model meta variant %q", v)
	}

	preds, err := exec(tagger.StagePredict, map[string]any{"corpus_file": "text.txt"}, map[string][]stages.Artifact{"model": {outs["model"]}, "corpus": {data}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := dataset.ReadPredictions(bytes.NewReader(read(preds["predictions"], dataset.PredictionsFile)), dataset.PredictionsFile)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(p.Tags, " ") != "O B-PER I-PER B-LOC I-LOC" || len(p.Sentences) != len(c.Sentences) {
		t.Fatalf("tag set %v, %d sentences", p.Tags, len(p.Sentences))
	}
	gold := make([][]string, len(c.Sentences))
	for i, s := range c.Sentences {
		gold[i] = s.Tags
	}
	want, err := eval.Evaluate(gold, p.HardTags(), corpus.AnyScheme)
	if err != nil {
		t.Fatal(err)
	}
	res, err := exec(tagger.StageEvaluate, map[string]any{"gold_file": "text.txt", "gold_labels": "labels.txt"},
		map[string][]stages.Artifact{"gold": {data}, "predictions": {preds["predictions"]}})
	if err != nil {
		t.Fatal(err)
	}
	var rep eval.Report
	if err := json.Unmarshal(read(res["report"], "report.json"), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Micro != want.Micro {
		t.Errorf("train.evaluate on the predictions: %+v, want %+v", rep.Micro, want.Micro)
	}
	// Method vsl scores its model as every method does, train.evaluate
	// given the model itself: the same tags, the same score.
	res, err = exec(tagger.StageEvaluate, map[string]any{"gold_file": "text.txt", "gold_labels": "labels.txt"},
		map[string][]stages.Artifact{"gold": {data}, "model": {outs["model"]}})
	if err != nil {
		t.Fatal(err)
	}
	rep = eval.Report{}
	if err := json.Unmarshal(read(res["report"], "report.json"), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Micro != want.Micro {
		t.Errorf("train.evaluate on the model: %+v, want %+v (its predictions' score)", rep.Micro, want.Micro)
	}

	// Bad labels are a permanent error naming the file and line.
	bad := stagestest.ImportFiles(t, st, map[string][]byte{"text.txt": []byte("John lives here\n"), "labels.txt": []byte("B-PER O\n")})
	_, err = exec(StageTrain, map[string]any{"corpus_file": "text.txt", "corpus_labels": "labels.txt"}, map[string][]stages.Artifact{"corpus": {bad}, "embeddings": {emb}})
	if err == nil || !stages.IsPermanent(err) || !strings.Contains(err.Error(), "labels.txt:1") {
		t.Errorf("labels of the wrong length: %v", err)
	}
}
