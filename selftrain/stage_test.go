package selftrain

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/stages/stagestest"
	"github.com/nerflow/nerflow/storage/fsstore"
	"github.com/nerflow/nerflow/train/tagger"
)

// TestStage runs selftrain.tagger on a file store, as the engine would:
// a tagger and a corpus in, a self-trained tagger that loads and a report
// out; with language models in too, the same on augmented sentences.
func TestStage(t *testing.T) {
	t.Run("originals", func(t *testing.T) { testStage(t, false) })
	t.Run("augmented", func(t *testing.T) { testStage(t, true) })
}

// stageInputs imports a tiny tagger and the fixture corpus into a new file
// store.
func stageInputs(t *testing.T) (st *fsstore.Store, model, text stages.Artifact) {
	t.Helper()
	ctx := context.Background()
	st, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	modelDir := t.TempDir()
	if err := tinyTagger(t).Save(modelDir); err != nil {
		t.Fatal(err)
	}
	model, err = stages.Import(ctx, st, "datasets", modelDir, "")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := corpus.Write(&b, fixtureCorpus(), corpus.FormatCoNLL); err != nil {
		t.Fatal(err)
	}
	return st, model, stagestest.ImportFiles(t, st, map[string][]byte{"train.conll": b.Bytes()})
}

// execStage runs stage name on a store with params and inputs, checks that
// its model loads, and returns its report.json.
func execStage(t *testing.T, st *fsstore.Store, name string, params map[string]any, inputs map[string][]stages.Artifact, log *slog.Logger) []byte {
	t.Helper()
	ctx := context.Background()
	s, _ := stages.Lookup(name)
	p, err := s.ResolveParams(params)
	if err != nil {
		t.Fatal(err)
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
	device, err := tagger.ParseDevice("cpu")
	if err != nil {
		t.Fatal(err)
	}
	m, err := tagger.Load(dir, device)
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	raw, err := stages.NewInput(ctx, st, outs["report"]).ReadFile("report.json")
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func testStage(t *testing.T, augmented bool) {
	ctx := context.Background()
	st, model, text := stageInputs(t)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
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
	raw := execStage(t, st, StageTagger, map[string]any{"epochs": 2, "update_interval": 2, "entity_threshold": 0.6, "batch_size": 2, "learning_rate": 0.01}, inputs, log)
	var rep struct {
		Result tagger.Result `json:"result"`
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

// TestTeacherStage runs selftrain.teacher on a file store: 6 sentences in
// batches of 2 over 2 epochs with a new teacher every 2 steps are 3
// teachers, logged and reported, scored on the dev set every 2 steps and
// after each epoch (steps 2, 3, 4, 6).
func TestTeacherStage(t *testing.T) {
	st, model, text := stageInputs(t)
	var logs bytes.Buffer
	params := map[string]any{"epochs": 2, "period": 2, "labels": LabelsHard, "threshold": 0.6, "eval_every": 2, "batch_size": 2, "learning_rate": 0.01}
	inputs := map[string][]stages.Artifact{"model": {model}, "corpus": {text}, "dev": {text}}
	raw := execStage(t, st, StageTeacher, params, inputs, slog.New(slog.NewTextHandler(&logs, nil)))
	var rep struct {
		Config TeacherConfig `json:"teacher_student"`
		Result StudentResult `json:"result"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	var steps []int
	for _, e := range rep.Result.Evaluations {
		steps = append(steps, e.Step)
	}
	if len(rep.Result.Teachers) != 3 || rep.Result.Steps != 6 || !slices.Equal(steps, []int{2, 3, 4, 6}) {
		t.Errorf("%d teachers over %d steps, evaluations at %v: want 3 teachers, 6 steps, evaluations at [2 3 4 6]", len(rep.Result.Teachers), rep.Result.Steps, steps)
	}
	if rep.Config.Period != 2 || rep.Config.Pseudo != (Pseudo{Labels: LabelsHard, Threshold: 0.6}) || rep.Config.Run.Loss != tagger.LossKL {
		t.Errorf("reported config %+v", rep.Config)
	}
	if n := strings.Count(logs.String(), "msg=teacher "); n != 3 {
		t.Errorf("%d teachers logged, want 3:\n%s", n, logs.String())
	}
}

// TestStageEnsembleEntityTarget: entity_target=ensemble reads the averaged
// predictions from input soft (here the tagger's own predictions of the
// corpus); without them, with them for another target, or with another tag
// set, the stage fails before training, saying why.
func TestStageEnsembleEntityTarget(t *testing.T) {
	ctx := context.Background()
	st, model, text := stageInputs(t)
	m := tinyTagger(t)
	defer m.Close()
	preds, err := m.Predict(fixtureCorpus(), 8)
	if err != nil {
		t.Fatal(err)
	}
	importPreds := func(tags []string) stages.Artifact {
		var b bytes.Buffer
		if err := dataset.WritePredictions(&b, &dataset.Predictions{Scheme: m.TagSet().Scheme.String(), Tags: tags, Sentences: preds}); err != nil {
			t.Fatal(err)
		}
		return stagestest.ImportFiles(t, st, map[string][]byte{dataset.PredictionsFile: b.Bytes()})
	}
	soft := importPreds(m.TagSet().Tags)
	params := map[string]any{"epochs": 1, "update_interval": 2, "entity_threshold": 0.6, "batch_size": 2, "learning_rate": 0.01, "entity_target": EntityEnsemble}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	execStage(t, st, StageTagger, params, map[string][]stages.Artifact{"model": {model}, "corpus": {text}, "soft": {soft}}, log)

	wrongTags := slices.Clone(m.TagSet().Tags)
	slices.Reverse(wrongTags)
	s, _ := stages.Lookup(StageTagger)
	for name, tc := range map[string]struct {
		target string
		soft   []stages.Artifact
		want   string
	}{
		"no soft":       {EntityEnsemble, nil, "needs the input soft"},
		"soft for hard": {EntityHard, []stages.Artifact{soft}, "only read with entity_target ensemble"},
		"tag set":       {EntityEnsemble, []stages.Artifact{importPreds(wrongTags)}, "input soft: tag set"},
	} {
		params["entity_target"] = tc.target
		p, err := s.ResolveParams(params)
		if err != nil {
			t.Fatal(err)
		}
		inputs := map[string][]stages.Artifact{"model": {model}, "corpus": {text}}
		if tc.soft != nil {
			inputs["soft"] = tc.soft
		}
		_, err = stages.Exec(ctx, s, stages.Env{Store: st, Params: p, Inputs: inputs, Log: log, OutputPrefix: "runs/selftrain/" + stages.NewAttemptID()})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !stages.IsPermanent(err) {
			t.Errorf("%s: error %v, want a permanent one containing %q", name, err, tc.want)
		}
	}
}
