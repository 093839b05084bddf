package tagger_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/distant"
	"github.com/nerflow/nerflow/embeddings"
	"github.com/nerflow/nerflow/eval"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/stages/stagestest"
	"github.com/nerflow/nerflow/storage"
	"github.com/nerflow/nerflow/storage/fsstore"
	"github.com/nerflow/nerflow/train/tagger"
)

// winkFixture is a wink-shaped vectors file: 3 components, norm, index.
const winkFixture = `{"precision":8,"l2NormIndex":3,"wordIndex":4,"size":5,"dimensions":3,
"words":["the","paris","london","in","zebra"],
"vectors":{"the":[0.1,0.2,0.3,0.37,0],"paris":[1,0,0,1,1],"london":[0,1,0,1,2],"in":[0,0,1,1,3],"zebra":[1,1,1,1.73,4]},
"unkVector":[0,0,0,0,0]}`

// stageEnv runs stages on a file store, as the engine would.
type stageEnv struct {
	t   *testing.T
	ctx context.Context
	st  storage.Store
	n   int
}

func newStageEnv(t *testing.T) *stageEnv {
	st, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &stageEnv{t: t, ctx: context.Background(), st: st}
}

func (e *stageEnv) exec(name string, params map[string]any, inputs map[string][]stages.Artifact, opts ...func(*stages.Env)) (map[string]stages.Artifact, error) {
	e.t.Helper()
	s, ok := stages.Lookup(name)
	if !ok {
		e.t.Fatalf("stage %s not registered", name)
	}
	p, err := s.ResolveParams(params)
	if err != nil {
		e.t.Fatal(err)
	}
	e.n++
	env := stages.Env{Store: e.st, Params: p, Inputs: inputs, OutputPrefix: "runs/" + name + "/" + stages.NewAttemptID()}
	for _, o := range opts {
		o(&env)
	}
	return stages.Exec(e.ctx, s, env)
}

func (e *stageEnv) read(a stages.Artifact, name string) []byte {
	b, err := stages.NewInput(e.ctx, e.st, a).ReadFile(name)
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

// textLabels writes a fixture corpus as CoNLL-2003's text and labels files.
func textLabels(lines []string, prefix string) map[string][]byte {
	var text, labels strings.Builder
	for _, s := range fixtureCorpus(lines).Sentences {
		text.WriteString(strings.Join(s.Tokens, " ") + "\n")
		labels.WriteString(strings.Join(s.Tags, " ") + "\n")
	}
	return map[string][]byte{prefix + "_text.txt": []byte(text.String()), prefix + "_label.txt": []byte(labels.String())}
}

func tinyStageParams(extra map[string]any) map[string]any {
	p := map[string]any{
		"char_dim": 6, "char_filters": 8, "casing_dim": 4, "hidden": 10, "dropout": 0.1,
		"epochs": 4, "batch_size": 4, "learning_rate": 0.02, "seed": 3, "min_word_count": 1,
		"corpus_file": "train_text.txt", "corpus_labels": "train_label.txt",
		"dev_file": "dev_text.txt", "dev_labels": "dev_label.txt",
	}
	for k, v := range extra {
		p[k] = v
	}
	return p
}

func TestStagesTrainPredictEvaluate(t *testing.T) {
	e := newStageEnv(t)
	files := textLabels(fixture, "train")
	for k, v := range textLabels(fixture[:5], "dev") {
		files[k] = v
	}
	data := stagestest.ImportFiles(e.t, e.st, files)
	vectors := stagestest.ImportFiles(e.t, e.st, map[string][]byte{"wink.json": []byte(winkFixture)})

	outs, err := e.exec(embeddings.StageName, map[string]any{"frequent": 1, "files": []any{"*_text.txt"}},
		map[string][]stages.Artifact{"vectors": {vectors}, "corpora": {data}})
	if err != nil {
		t.Fatal(err)
	}
	emb := outs["embeddings"]
	// Every word of the package (all is the default); the tagger trains the
	// rows of the four it meets in training (the, paris, london, in) and
	// keeps the fifth frozen.
	if emb.Meta["words"] != "5" {
		t.Errorf("embeddings meta %v", emb.Meta)
	}

	outs, err = e.exec(tagger.StageTrain, tinyStageParams(map[string]any{"loss": "gce", "update_interval": 3, "drop_o": 0.2}),
		map[string][]stages.Artifact{"corpus": {data}, "dev": {data}, "embeddings": {emb}})
	if err != nil {
		t.Fatal(err)
	}
	model := outs["model"]
	var report struct {
		Pretrained int
		Result     tagger.Result
	}
	if err := json.Unmarshal(e.read(outs["report"], "report.json"), &report); err != nil {
		t.Fatal(err)
	}
	if report.Pretrained != 4 || len(report.Result.Epochs) != 4 || report.Result.BestEpoch == 0 {
		t.Fatalf("report %+v", report)
	}

	predParams := map[string]any{"corpus_file": "dev_text.txt"}
	outs, err = e.exec(tagger.StagePredict, predParams, map[string][]stages.Artifact{"model": {model}, "corpus": {data}})
	if err != nil {
		t.Fatal(err)
	}
	read, err := dataset.ReadPredictions(strings.NewReader(string(e.read(outs["predictions"], dataset.PredictionsFile))), dataset.PredictionsFile)
	if err != nil {
		t.Fatal(err)
	}
	labels, preds := read.Tags, read.Sentences
	if strings.Join(labels, " ") != "O I-PER I-LOC" || len(preds) != 5 {
		t.Fatalf("labels %v, %d predictions", labels, len(preds))
	}
	tagged, err := corpus.Read(strings.NewReader(string(e.read(outs["tagged"], "tagged.conll"))), "tagged.conll", corpus.FormatCoNLL)
	if err != nil {
		t.Fatal(err)
	}
	gold := fixtureCorpus(fixture[:5])
	var goldTags, predTags [][]string
	for i, s := range tagged.Sentences {
		if strings.Join(s.Tags, " ") != strings.Join(preds[i].Tags, " ") {
			t.Fatalf("sentence %d: tagged corpus %v, predictions %v", i+1, s.Tags, preds[i].Tags)
		}
		goldTags, predTags = append(goldTags, gold.Sentences[i].Tags), append(predTags, s.Tags)
	}
	want, err := eval.Evaluate(goldTags, predTags, corpus.AnyScheme)
	if err != nil {
		t.Fatal(err)
	}

	// A student distills the predictions (loss kl, soft targets aligned
	// with the dev sentences, which need no tags).
	student, err := e.exec(tagger.StageTrain, tinyStageParams(map[string]any{"loss": "kl", "corpus_file": "dev_text.txt", "corpus_labels": "", "epochs": 2}),
		map[string][]stages.Artifact{"corpus": {data}, "soft": {outs["predictions"]}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := student["model"].File(tagger.WeightsFile); !ok {
		t.Fatal("the student has no weights")
	}
	_, err = e.exec(tagger.StageTrain, tinyStageParams(map[string]any{"loss": "kl", "scheme": "bio", "corpus_file": "dev_text.txt", "corpus_labels": ""}),
		map[string][]stages.Artifact{"corpus": {data}, "soft": {outs["predictions"]}})
	if err == nil || !strings.Contains(err.Error(), "not that of a bio tagger") {
		t.Fatalf("soft targets of an io tagger for a bio student: %v", err)
	}

	// Evaluating the model and evaluating its predictions agree with a
	// direct evaluation.
	evalParams := map[string]any{"gold_file": "dev_text.txt", "gold_labels": "dev_label.txt"}
	for name, in := range map[string]stages.Artifact{"model": model, "predictions": outs["predictions"]} {
		res, err := e.exec(tagger.StageEvaluate, evalParams, map[string][]stages.Artifact{"gold": {data}, name: {in}})
		if err != nil {
			t.Fatal(err)
		}
		var rep eval.Report
		if err := json.Unmarshal(e.read(res["report"], "report.json"), &rep); err != nil {
			t.Fatal(err)
		}
		if rep.Micro != want.Micro {
			t.Errorf("evaluate from %s: %+v, want %+v", name, rep.Micro, want.Micro)
		}
	}
	if _, err := e.exec(tagger.StageEvaluate, evalParams, map[string][]stages.Artifact{"gold": {data}}); err == nil || !stages.IsPermanent(err) {
		t.Errorf("evaluate without model or predictions: %v", err)
	}

	// The distant labels of the dev sentences as the baseline: the
	// gazetteer finds John Smith, Paris and Berlin, 3 of the 10 gold
	// entities and nothing wrong, so P 1, R 0.3, F1 6/13; the evaluation
	// reports that beside the model's score.
	gaz := stagestest.ImportFiles(e.t, e.st, map[string][]byte{"gaz.tsv": []byte("PER\tJohn Smith\nLOC\tParis\nLOC\tBerlin\n")})
	labeled, err := e.exec(distant.StageName, map[string]any{"scheme": "bio", "corpus_file": "dev_text.txt", "corpus_labels": "dev_label.txt",
		"gold_file": "dev_text.txt", "gold_labels": "dev_label.txt"}, map[string][]stages.Artifact{"corpus": {data}, "gold": {data}, "gazetteers": {gaz}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.exec(tagger.StageEvaluate, evalParams, map[string][]stages.Artifact{"gold": {data}, "model": {model}, "baseline": {labeled["report"]}})
	if err != nil {
		t.Fatal(err)
	}
	var scored struct {
		eval.Report
		Baseline *eval.Report
	}
	if err := json.Unmarshal(e.read(res["report"], "report.json"), &scored); err != nil {
		t.Fatal(err)
	}
	if scored.Micro != want.Micro || scored.Baseline == nil || math.Abs(scored.Baseline.Micro.F1-6.0/13) > 1e-9 || scored.Baseline.Micro.Precision != 1 {
		t.Errorf("evaluate with a baseline: model %+v (want %+v), baseline %+v", scored.Micro, want.Micro, scored.Baseline)
	}
	table := string(e.read(res["report"], "report.txt"))
	if wantRow := fmt.Sprintf("micro avg  %7.2f %7.2f %7.2f  %7.2f %7.2f %7.2f  %+7.2f", 100*want.Micro.Precision, 100*want.Micro.Recall, 100*want.Micro.F1,
		100.0, 30.0, 600.0/13, 100*(want.Micro.F1-6.0/13)); !strings.Contains(table, wantRow) {
		t.Errorf("report.txt lacks the comparison row %q:\n%s", wantRow, table)
	}
	// A baseline of another split is refused.
	allParams := map[string]any{"gold_file": "train_text.txt", "gold_labels": "train_label.txt"}
	if _, err := e.exec(tagger.StageEvaluate, allParams, map[string][]stages.Artifact{"gold": {data}, "model": {model}, "baseline": {labeled["report"]}}); err == nil || !stages.IsPermanent(err) || !strings.Contains(err.Error(), "not the same split") {
		t.Errorf("a baseline of 5 sentences for 10 gold sentences: %v", err)
	}
}

// TestTrainStageResumes: an attempt that dies after its second epoch leaves
// a checkpoint; the next attempt resumes from it and produces exactly the
// model of an uninterrupted run.
func TestTrainStageResumes(t *testing.T) {
	e := newStageEnv(t)
	files := textLabels(fixture, "train")
	for k, v := range textLabels(fixture[:4], "dev") {
		files[k] = v
	}
	data := stagestest.ImportFiles(e.t, e.st, files)
	inputs := map[string][]stages.Artifact{"corpus": {data}, "dev": {data}}
	params := tinyStageParams(map[string]any{"epochs": 4})

	whole, err := e.exec(tagger.StageTrain, params, inputs)
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.ctx = ctx
	withCheckpoints := func(attempt int, progress func(stages.ProgressUpdate)) func(*stages.Env) {
		return func(env *stages.Env) {
			env.CheckpointPrefix, env.Attempt, env.Progress = "checkpoints/train", attempt, progress
		}
	}
	_, err = e.exec(tagger.StageTrain, params, inputs, withCheckpoints(0, func(p stages.ProgressUpdate) {
		if strings.HasPrefix(p.Note, "epoch 3/") {
			cancel() // the worker dies during epoch 3
		}
	}))
	if err == nil {
		t.Fatal("the interrupted attempt succeeded")
	}
	e.ctx = context.Background()
	resumed, err := e.exec(tagger.StageTrain, params, inputs, withCheckpoints(1, nil))
	if err != nil {
		t.Fatal(err)
	}
	var report struct{ Result tagger.Result }
	if err := json.Unmarshal(e.read(resumed["report"], "report.json"), &report); err != nil {
		t.Fatal(err)
	}
	if report.Result.Resumed != 2 {
		t.Errorf("resumed %d epochs, want 2", report.Result.Resumed)
	}
	a, _ := whole["model"].File(tagger.WeightsFile)
	b, _ := resumed["model"].File(tagger.WeightsFile)
	if a.Digest != b.Digest {
		t.Errorf("weights of the resumed run %s, uninterrupted %s", b.Digest, a.Digest)
	}
}
