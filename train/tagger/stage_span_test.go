package tagger_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/stages/stagestest"
	"github.com/nerflow/nerflow/train/tagger"
)

// TestSpanStage trains the span head with weighted negative sampling on a
// corpus that lost two entities, with the full corpus as its complete
// annotation: the report gives every epoch's missampling rate, and the
// model's predictions are scorable by train.evaluate like a tagger's.
func TestSpanStage(t *testing.T) {
	e := newStageEnv(t)
	masked := append([]string{
		"John/B-PER Smith/I-PER lives in Paris .",
		"Mary visited Berlin/B-LOC yesterday .",
	}, fixture[2:]...)
	files := textLabels(masked, "train")
	for k, v := range textLabels(fixture, "full") {
		files[k] = v
	}
	for k, v := range textLabels(fixture[:5], "dev") {
		files[k] = v
	}
	data := stagestest.ImportFiles(e.t, e.st, files)
	params := tinyStageParams(map[string]any{"head": tagger.SpanHead, "loss": tagger.LossNegSample, "sampling": tagger.SamplingWeighted,
		"scheme": "bio", "max_span": 3, "epochs": 2, "complete_file": "full_text.txt", "complete_labels": "full_label.txt"})
	outs, err := e.exec(tagger.StageTrain, params, map[string][]stages.Artifact{"corpus": {data}, "dev": {data}, "complete": {data}})
	if err != nil {
		t.Fatal(err)
	}
	var report struct{ Result tagger.Result }
	if err := json.Unmarshal(e.read(outs["report"], "report.json"), &report); err != nil {
		t.Fatal(err)
	}
	for _, ep := range report.Result.Epochs {
		if ep.Negatives == 0 || ep.Missampling == nil {
			t.Errorf("epoch %d: %d negatives, missampling %v", ep.Epoch, ep.Negatives, ep.Missampling)
		}
	}
	preds, err := e.exec(tagger.StagePredict, map[string]any{"corpus_file": "dev_text.txt"}, map[string][]stages.Artifact{"model": {outs["model"]}, "corpus": {data}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := dataset.ReadPredictions(strings.NewReader(string(e.read(preds["predictions"], dataset.PredictionsFile))), dataset.PredictionsFile)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(p.Tags, " ") != "O B-PER I-PER B-LOC I-LOC" || len(p.Sentences) != 5 {
		t.Errorf("tag set %v, %d sentences", p.Tags, len(p.Sentences))
	}
	if _, err := e.exec(tagger.StageEvaluate, map[string]any{"gold_file": "dev_text.txt", "gold_labels": "dev_label.txt"},
		map[string][]stages.Artifact{"gold": {data}, "predictions": {preds["predictions"]}}); err != nil {
		t.Fatal(err)
	}

	// A complete annotation of other sentences is refused, naming it.
	params["complete_file"], params["complete_labels"] = "dev_text.txt", "dev_label.txt"
	_, err = e.exec(tagger.StageTrain, params, map[string][]stages.Artifact{"corpus": {data}, "complete": {data}})
	if err == nil || !strings.Contains(err.Error(), "complete annotation: 5 sentences for 10 training sentences") {
		t.Errorf("complete annotation of the dev sentences: %v", err)
	}
}
