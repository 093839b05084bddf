package tagger_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/augment"
	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/stages/stagestest"
	"github.com/nerflow/nerflow/train/tagger"
)

// TagLM end to end on the fixture: language models pretrained by
// augment.lm, a tagger trained with their states after its first BiLSTM
// layer (its loss goes down), the language models saved in the tagger's
// checkpoint unchanged (frozen), and the checkpoint tagging on its own.
func TestTagLMStages(t *testing.T) {
	e := newStageEnv(t)
	files := textLabels(fixture, "train")
	for k, v := range textLabels(fixture[:5], "dev") {
		files[k] = v
	}
	data := stagestest.ImportFiles(e.t, e.st, files)
	lmOuts, err := e.exec(augment.StageLM, map[string]any{
		"dim": 4, "hidden": 6, "epochs": 2, "batch_size": 4, "min_count": 1, "max_words": 100,
		"corpus_file": "train_text.txt", "corpus_labels": "train_label.txt",
	}, map[string][]stages.Artifact{"corpus": {data}})
	if err != nil {
		t.Fatal(err)
	}

	params := tinyStageParams(map[string]any{"layers": 2, "head": tagger.CRFHead, "loss": tagger.LossCRF, "scheme": "bio",
		"lm_placement": tagger.LMLayer1, "epochs": 8})
	outs, err := e.exec(tagger.StageTrain, params, map[string][]stages.Artifact{"corpus": {data}, "dev": {data}, "lm": {lmOuts["lm"]}})
	if err != nil {
		t.Fatal(err)
	}
	var report struct {
		Model  tagger.Config
		Result tagger.Result
	}
	if err := json.Unmarshal(e.read(outs["report"], "report.json"), &report); err != nil {
		t.Fatal(err)
	}
	eps := report.Result.Epochs
	if report.Model.LMDim != 12 || len(eps) != 8 || !(eps[len(eps)-1].TrainLoss < 0.7*eps[0].TrainLoss) {
		t.Fatalf("lm_dim %d (want 2 × 6), epochs %+v: want the loss down by 30%%", report.Model.LMDim, eps)
	}
	digests := map[string]string{}
	for _, f := range outs["model"].Files {
		digests[f.Name] = f.Digest
	}
	for _, f := range lmOuts["lm"].Files {
		if digests["lm/"+f.Name] != f.Digest {
			t.Errorf("the tagger's lm/%s is not the language model it was given (digest %q, want %q)", f.Name, digests["lm/"+f.Name], f.Digest)
		}
	}

	// Prediction reads the language models from the checkpoint alone.
	pred, err := e.exec(tagger.StagePredict, map[string]any{"corpus_file": "dev_text.txt"},
		map[string][]stages.Artifact{"model": {outs["model"]}, "corpus": {data}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := dataset.ReadPredictions(strings.NewReader(string(e.read(pred["predictions"], dataset.PredictionsFile))), "p")
	if err != nil || len(p.Sentences) != 5 || len(p.Sentences[0].Tags) != 6 {
		t.Fatalf("predictions: %v %+v", err, p)
	}

	// A language model given without a placement is an error, not ignored.
	params["lm_placement"] = tagger.LMNone
	if _, err := e.exec(tagger.StageTrain, params, map[string][]stages.Artifact{"corpus": {data}, "lm": {lmOuts["lm"]}}); err == nil ||
		!strings.Contains(err.Error(), "lm_placement is none") || !stages.IsPermanent(err) {
		t.Errorf("language model without a placement: %v", err)
	}
}
