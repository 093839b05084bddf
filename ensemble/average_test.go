package ensemble

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/stages/stagestest"
	"github.com/nerflow/nerflow/storage/fsstore"
)

func preds(rows ...[][]float32) *dataset.Predictions {
	p := &dataset.Predictions{Scheme: "io", Tags: []string{"O", "I-LOC", "I-PER"}}
	for _, r := range rows {
		p.Sentences = append(p.Sentences, dataset.Prediction{Tags: make([]string, len(r)), Probs: r})
	}
	return p
}

func TestAverageHandComputed(t *testing.T) {
	a := preds([][]float32{{0.6, 0.3, 0.1}, {1, 0, 0}}, [][]float32{})
	b := preds([][]float32{{0.2, 0.1, 0.7}, {0.5, 0.5, 0}}, [][]float32{})
	c := preds([][]float32{{0.1, 0.8, 0.1}, {0.9, 0.05, 0.05}}, [][]float32{})
	got, err := Average([]string{"a", "b", "c"}, []*dataset.Predictions{a, b, c})
	if err != nil {
		t.Fatal(err)
	}
	// Token 1: (0.6+0.2+0.1)/3 = 0.3, (0.3+0.1+0.8)/3 = 0.4, (0.1+0.7+0.1)/3 = 0.3: I-LOC wins although each
	// tagger alone picks another tag or agrees only once. Token 2: 0.8, 0.18333, 0.01667.
	want := [][]float32{{0.3, 0.4, 0.3}, {0.8, 0.55 / 3, 0.05 / 3}}
	for t1, row := range want {
		for c, x := range row {
			if d := math.Abs(float64(got.Sentences[0].Probs[t1][c] - x)); d > 1e-6 {
				t.Errorf("token %d tag %d: %v, want %v", t1+1, c, got.Sentences[0].Probs[t1][c], x)
			}
		}
	}
	if strings.Join(got.Sentences[0].Tags, " ") != "I-LOC O" {
		t.Errorf("tags %v, want [I-LOC O]", got.Sentences[0].Tags)
	}
	if len(got.Sentences[1].Probs) != 0 || got.Sentences[1].Tags == nil {
		t.Errorf("empty sentence: %+v", got.Sentences[1])
	}
}

func TestAverageMismatches(t *testing.T) {
	good := preds([][]float32{{1, 0, 0}, {0, 1, 0}}, [][]float32{{0, 0, 1}})
	otherTags := preds([][]float32{{1, 0, 0}, {0, 1, 0}}, [][]float32{{0, 0, 1}})
	otherTags.Tags = []string{"O", "I-LOC", "I-ORG"}
	for name, tc := range map[string]struct {
		p    *dataset.Predictions
		want string
	}{
		"tag set":   {otherTags, "second against first: tag set io [O I-LOC I-ORG]"},
		"sentences": {preds([][]float32{{1, 0, 0}, {0, 1, 0}}), "second against first: 1 sentences, want 2"},
		"tokens":    {preds([][]float32{{1, 0, 0}, {0, 1, 0}}, [][]float32{{0, 0, 1}, {1, 0, 0}}), "second against first: sentence 2: 2 tokens, want 1 (token 2"},
		"row":       {preds([][]float32{{1, 0, 0}, {0, 1}}, [][]float32{{0, 0, 1}}), "second against first: sentence 1, token 2: 2 probabilities for 3 tags"},
	} {
		_, err := Average([]string{"first", "second"}, []*dataset.Predictions{good, tc.p})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", name, err, tc.want)
		}
	}
	if _, err := Average(nil, nil); err == nil {
		t.Error("no predictions: no error")
	}
}

// TestAverageStage runs the stage on a file store: two prediction artifacts
// in, their mean out; a third of another corpus is refused with its name.
func TestAverageStage(t *testing.T) {
	ctx := context.Background()
	st, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	artifact := func(p *dataset.Predictions) stages.Artifact {
		var b bytes.Buffer
		if err := dataset.WritePredictions(&b, p); err != nil {
			t.Fatal(err)
		}
		return stagestest.ImportFiles(t, st, map[string][]byte{dataset.PredictionsFile: b.Bytes()})
	}
	a := artifact(preds([][]float32{{0.5, 0.5, 0}}))
	b := artifact(preds([][]float32{{0, 0.5, 0.5}}))
	s, _ := stages.Lookup(StageAverage)
	p, err := s.ResolveParams(nil)
	if err != nil {
		t.Fatal(err)
	}
	exec := func(ins ...stages.Artifact) (map[string]stages.Artifact, error) {
		return stages.Exec(ctx, s, stages.Env{Store: st, Params: p, Inputs: map[string][]stages.Artifact{"predictions": ins}, OutputPrefix: "runs/avg/" + stages.NewAttemptID()})
	}
	outs, err := exec(a, b)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := stages.NewInput(ctx, st, outs["predictions"]).ReadFile(dataset.PredictionsFile)
	if err != nil {
		t.Fatal(err)
	}
	got, err := dataset.ReadPredictions(bytes.NewReader(raw), dataset.PredictionsFile)
	if err != nil {
		t.Fatal(err)
	}
	if row := got.Sentences[0].Probs[0]; row[0] != 0.25 || row[1] != 0.5 || row[2] != 0.25 || got.Sentences[0].Tags[0] != "I-LOC" {
		t.Errorf("averaged %v %v, want [0.25 0.5 0.25] I-LOC", row, got.Sentences[0].Tags)
	}
	_, err = exec(a, b, artifact(preds([][]float32{{1, 0, 0}, {1, 0, 0}})))
	if err == nil || !stages.IsPermanent(err) || !strings.Contains(err.Error(), "predictions #3") || !strings.Contains(err.Error(), "sentence 1: 2 tokens, want 1") {
		t.Errorf("mismatched artifact: %v, want a permanent error naming predictions #3, sentence 1", err)
	}
}
