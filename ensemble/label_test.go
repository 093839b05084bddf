package ensemble

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/stages/stagestest"
	"github.com/nerflow/nerflow/storage/fsstore"
)

// The averaged predictions' best tags label the corpus they are of; a
// corpus of other sentences is refused, naming the first that differs.
func TestLabelStage(t *testing.T) {
	ctx := context.Background()
	st, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	avg, err := Average([]string{"a", "b"}, []*dataset.Predictions{
		preds([][]float32{{0.5, 0.5, 0}, {0.9, 0.1, 0}}), preds([][]float32{{0, 0.5, 0.5}, {0.1, 0, 0.9}}),
	})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := dataset.WritePredictions(&b, avg); err != nil {
		t.Fatal(err)
	}
	predictions := stagestest.ImportFiles(t, st, map[string][]byte{dataset.PredictionsFile: b.Bytes()})
	s, _ := stages.Lookup(StageLabel)
	exec := func(text string) (map[string]stages.Artifact, error) {
		sentences := stagestest.ImportFiles(t, st, map[string][]byte{"raw.txt": []byte(text)})
		p, err := s.ResolveParams(nil)
		if err != nil {
			t.Fatal(err)
		}
		return stages.Exec(ctx, s, stages.Env{Store: st, Params: p, OutputPrefix: "runs/label/" + stages.NewAttemptID(),
			Inputs: map[string][]stages.Artifact{"predictions": {predictions}, "corpus": {sentences}}})
	}
	outs, err := exec("Paris Anna\n")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := stages.NewInput(ctx, st, outs["labeled"]).ReadFile("labeled.conll")
	if err != nil {
		t.Fatal(err)
	}
	c, err := corpus.Read(bytes.NewReader(raw), "labeled.conll", corpus.FormatCoNLL)
	if err != nil {
		t.Fatal(err)
	}
	// Token 1: (0.25, 0.5, 0.25) -> I-LOC; token 2: (0.5, 0.05, 0.45) -> O.
	if got := strings.Join(c.Sentences[0].Tags, " "); got != "I-LOC O" || outs["labeled"].Meta[dataset.MetaScheme] != "io" {
		t.Errorf("labeled %q, meta %v", got, outs["labeled"].Meta)
	}
	if _, err := exec("Paris Anna Weber\n"); err == nil || !stages.IsPermanent(err) || !strings.Contains(err.Error(), "sentence 1: 3 tokens but 2 predicted tags") {
		t.Errorf("other sentences: %v", err)
	}
}
