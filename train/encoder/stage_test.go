package encoder

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/augment"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/stages/stagestest"
	"github.com/nerflow/nerflow/storage/fsstore"
	"github.com/nerflow/nerflow/train/tagger"
)

// TestPretrainStage runs encoder.pretrain as the engine does, on a file
// store, with a corpus and a Brown-format file (word/TAG tokens, the
// default unlabeled format and file pattern), and loads the encoder it
// writes.
func TestPretrainStage(t *testing.T) {
	ctx := context.Background()
	st, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var text, brown strings.Builder
	for i, s := range topics(200, 11) {
		if i%2 == 0 {
			text.WriteString(strings.Join(s, " ") + "\n")
			continue
		}
		for _, w := range s {
			brown.WriteString(w + "/nn ")
		}
		brown.WriteString("\n\n")
	}
	data := stagestest.ImportFiles(t, st, map[string][]byte{"text.txt": []byte(text.String())})
	var labels strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(text.String()), "\n") {
		var tags []string
		for _, w := range strings.Fields(line) {
			tag := "O"
			if w == "paris" || w == "rome" || w == "oslo" {
				tag = "I-LOC"
			}
			tags = append(tags, tag)
		}
		labels.WriteString(strings.Join(tags, " ") + "\n")
	}
	labeled := stagestest.ImportFiles(t, st, map[string][]byte{"text.txt": []byte(text.String()), "labels.txt": []byte(labels.String())})
	raw := stagestest.ImportFiles(t, st, map[string][]byte{"ca01": []byte(brown.String()), "README": []byte("not read")})
	s, ok := stages.Lookup(StagePretrain)
	if !ok {
		t.Fatal("stage not registered")
	}
	if s.DefaultQueue() != "gpu" {
		t.Errorf("queue %s, want gpu", s.DefaultQueue())
	}
	p, err := s.ResolveParams(map[string]any{"preset": "tiny", "layers": 1, "epochs": 2, "batch_size": 16, "corpus_file": "text.txt", "min_count": 1})
	if err != nil {
		t.Fatal(err)
	}
	outs, err := stages.Exec(ctx, s, stages.Env{Store: st, Params: p, Inputs: map[string][]stages.Artifact{"corpus": {data}, "unlabeled": {raw}},
		OutputPrefix: "runs/enc/" + stages.NewAttemptID()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := stages.NewInput(ctx, st, outs["report"]).ReadFile("report.json")
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		TrainingSentences  int           `json:"training_sentences"`
		UnlabeledSentences int           `json:"unlabeled_sentences"`
		Heldout            *Heldout      `json:"heldout"`
		Epochs             []EpochReport `json:"epochs"`
		Model              Config        `json:"model"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.UnlabeledSentences != 100 || rep.TrainingSentences != 196 || len(rep.Epochs) != 2 || rep.Heldout == nil || rep.Heldout.Perplexity <= 1 || rep.Model.Layers != 1 {
		t.Fatalf("report %s", b)
	}
	dir := t.TempDir()
	if err := stages.NewInput(ctx, st, outs["encoder"]).Fetch(dir); err != nil {
		t.Fatal(err)
	}
	m, err := Load(dir, gotch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Vocab.ID("paris") == Unknown || m.Config.Dim != Presets["tiny"].Dim {
		t.Fatalf("loaded encoder: %+v, paris %d", m.Config, m.Vocab.ID("paris"))
	}

	// RoSTER's augmentation draws from the encoder's head when its artifact
	// is the lm input of augment.sentences.
	as, ok := stages.Lookup(augment.StageSentences)
	if !ok {
		t.Fatal("augment.sentences not registered")
	}
	ap, err := as.ResolveParams(map[string]any{"corpus_file": "text.txt"})
	if err != nil {
		t.Fatal(err)
	}
	aouts, err := stages.Exec(ctx, as, stages.Env{Store: st, Params: ap, Inputs: map[string][]stages.Artifact{"lm": {outs["encoder"]}, "corpus": {data}},
		OutputPrefix: "runs/aug/" + stages.NewAttemptID()})
	if err != nil {
		t.Fatal(err)
	}
	b, err = stages.NewInput(ctx, st, aouts["report"]).ReadFile("report.json")
	if err != nil {
		t.Fatal(err)
	}
	var arep struct{ Stats augment.Stats }
	if err := json.Unmarshal(b, &arep); err != nil {
		t.Fatal(err)
	}
	if arep.Stats.Masked == 0 || arep.Stats.Tokens == 0 {
		t.Fatalf("augmentation report %s", b)
	}

	// A tagger reads the encoder's states as frozen features through its
	// lm input, and predicts from its checkpoint alone.
	ts, ok := stages.Lookup(tagger.StageTrain)
	if !ok {
		t.Fatal("train.tagger not registered")
	}
	tp, err := ts.ResolveParams(map[string]any{"corpus_file": "text.txt", "corpus_labels": "labels.txt", "lm_placement": tagger.LMInput,
		"epochs": 1, "hidden": 8, "char_filters": 4, "char_dim": 4, "min_word_count": 1})
	if err != nil {
		t.Fatal(err)
	}
	touts, err := stages.Exec(ctx, ts, stages.Env{Store: st, Params: tp, Inputs: map[string][]stages.Artifact{"lm": {outs["encoder"]}, "corpus": {labeled}},
		OutputPrefix: "runs/tagger/" + stages.NewAttemptID()})
	if err != nil {
		t.Fatal(err)
	}
	var trep struct{ Model tagger.Config }
	b, err = stages.NewInput(ctx, st, touts["report"]).ReadFile("report.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &trep); err != nil || trep.Model.LMDim != Presets["tiny"].Dim {
		t.Fatalf("tagger report: %v, lm_dim %d, want the encoder's width %d", err, trep.Model.LMDim, Presets["tiny"].Dim)
	}
	tdir := t.TempDir()
	if err := stages.NewInput(ctx, st, touts["model"]).Fetch(tdir); err != nil {
		t.Fatal(err)
	}
	tg, err := tagger.Load(tdir, gotch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()

	// Through its encoder input, a tagger fine-tunes the encoder: its
	// checkpoint holds the fine-tuned encoder (encoder/) and tags without
	// the encoder's artifact.
	fp, err := ts.ResolveParams(map[string]any{"corpus_file": "text.txt", "corpus_labels": "labels.txt", "encoder_placement": tagger.EncoderUnder,
		"encoder_learning_rate": 1e-3, "epochs": 1, "hidden": 8, "char_filters": 4, "char_dim": 4, "min_word_count": 1})
	if err != nil {
		t.Fatal(err)
	}
	fouts, err := stages.Exec(ctx, ts, stages.Env{Store: st, Params: fp, Inputs: map[string][]stages.Artifact{"encoder": {outs["encoder"]}, "corpus": {labeled}},
		OutputPrefix: "runs/finetune/" + stages.NewAttemptID()})
	if err != nil {
		t.Fatal(err)
	}
	fdir := t.TempDir()
	if err := stages.NewInput(ctx, st, fouts["model"]).Fetch(fdir); err != nil {
		t.Fatal(err)
	}
	tuned, err := Load(filepath.Join(fdir, "encoder"), gotch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	defer tuned.Close()
	if slices.Equal(host(t, tuned.layers[0].qkvW), host(t, m.layers[0].qkvW)) {
		t.Error("the tagger's checkpoint holds the encoder as pretrained, not fine-tuned")
	}
	ft, err := tagger.LoadModel(fdir, gotch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	defer ft.Close()
	if ft.(*tagger.Tagger).Config.EncoderDim != Presets["tiny"].Dim {
		t.Errorf("fine-tuned tagger: encoder_dim %d", ft.(*tagger.Tagger).Config.EncoderDim)
	}

	// An encoder_placement without an encoder is refused.
	np, err := ts.ResolveParams(map[string]any{"corpus_file": "text.txt", "corpus_labels": "labels.txt", "encoder_placement": tagger.EncoderReplace, "epochs": 1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = stages.Exec(ctx, ts, stages.Env{Store: st, Params: np, Inputs: map[string][]stages.Artifact{"corpus": {labeled}},
		OutputPrefix: "runs/noenc/" + stages.NewAttemptID()})
	if err == nil || !strings.Contains(err.Error(), "needs an encoder") {
		t.Errorf("encoder_placement without an encoder: error %v", err)
	}
}

// TestResumeContinuesExactly: a run stopped after its first epoch and
// resumed from the state it checkpointed ends with the weights of the run
// that was never stopped.
func TestResumeContinuesExactly(t *testing.T) {
	text := topics(60, 12)
	v := NewVocab(text, 0, 1)
	cfg := tinyConfig()
	cfg.Dropout, cfg.AttnDropout = 0.1, 0.1
	run := TrainConfig{Epochs: 2, BatchSize: 8, LearningRate: 1e-2, Warmup: 0.1, MaxGradNorm: 1, Masking: DefaultMasking(), Seed: 3}
	whole := newModel(t, cfg, v)
	if _, err := Train(context.Background(), whole, text, nil, run, Options{}); err != nil {
		t.Fatal(err)
	}
	stop := errors.New("stop")
	state := t.TempDir()
	first := newModel(t, cfg, v)
	_, err := Train(context.Background(), first, text, nil, run, Options{StateDir: state, Checkpoint: func(string, int) error { return stop }})
	if !errors.Is(err, stop) {
		t.Fatalf("err %v, want the checkpoint's", err)
	}
	resumed, err := New(cfg, v, nil, 99, gotch.CPU) // other initial weights: all must come from the state
	if err != nil {
		t.Fatal(err)
	}
	defer resumed.Close()
	hist, err := Train(context.Background(), resumed, text, nil, run, Options{StateDir: state, Resume: state})
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 2 || hist[0].Epoch != 1 {
		t.Fatalf("history %+v", hist)
	}
	a, b := whole.named(), resumed.named()
	for i := range a {
		if x, y := host(t, a[i].Tensor), host(t, b[i].Tensor); !slices.Equal(x, y) {
			t.Fatalf("%s differs after resuming", a[i].Name)
		}
	}
	if _, err := os.Stat(filepath.Join(state, WeightsFile)); err != nil {
		t.Fatal(err)
	}
}
