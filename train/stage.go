package train

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/embeddings"
	"github.com/nerflow/nerflow/eval"
	"github.com/nerflow/nerflow/stages"
)

// Stage names.
const (
	StageTrain    = "train.tagger"
	StagePredict  = "train.predict"
	StageEvaluate = "train.evaluate"
)

// corpusParams select the files of a corpus artifact: one file in any
// corpus format (the default, when the artifact has one file), or a text
// file with a parallel labels file, as CoNLL-2003's train_text.txt and
// train_label_dist.txt.
func corpusParams(port, what string) []stages.Param {
	return []stages.Param{
		stages.StringParam(port+"_file", "", "file of the "+port+" artifact holding the "+what+" (empty: its only file)"),
		stages.StringParam(port+"_labels", "", "labels file of the "+port+" artifact, parallel to "+port+"_file (empty: tags come with the sentences)"),
		stages.StringParam(port+"_format", "", "format of "+port+"_file (empty: from its name)"),
	}
}

func init() {
	d := DefaultConfig()
	r := DefaultTrainConfig()
	params := []stages.Param{
		stages.StringParam("head", d.Head, "token (RoSTER's entity-vs-O and type classifier) or crf", stages.OneOf(TokenHead, CRFHead)),
		stages.StringParam("scheme", d.Scheme, "tag scheme the tagger predicts", stages.OneOf("io", "bio", "bioes")),
		stages.StringParam("loss", r.Loss, "ce or gce (token head), crf (crf head), or kl to fit the soft targets of the input soft (token head)", stages.OneOf(LossCE, LossGCE, LossCRF, LossKL)),
		stages.FloatParam("q", r.Q, "exponent of generalized cross entropy", stages.Range(0, 1)),
		stages.FloatParam("tau", r.Tau, "noisy-label removal: a distant label the model gives at most this probability is noise", stages.Range(0, 1)),
		stages.IntParam("update_interval", r.UpdateInterval, "batches between noisy-label removals (0: no removal)", stages.AtLeast(0)),
		stages.FloatParam("drop_o", r.DropO, "fraction of O tokens left out of the loss", stages.Range(0, 0.99)),
		stages.BoolParam("unknown_as_entity", false, "tokens of the unknown type \"?\" count as entities of some type (else the loss ignores them)"),
		stages.IntParam("epochs", r.Epochs, "training epochs", stages.Range(1, 1000)),
		stages.IntParam("batch_size", r.BatchSize, "sentences per batch", stages.Range(1, 4096)),
		stages.FloatParam("learning_rate", r.LearningRate, "peak learning rate of Adam", stages.Range(1e-7, 1)),
		stages.FloatParam("warmup", r.Warmup, "fraction of the steps of linear warm-up before linear decay", stages.Range(0, 1)),
		stages.FloatParam("max_grad_norm", r.MaxGradNorm, "gradient norm clipping (0: none)", stages.AtLeast(0)),
		stages.IntParam("patience", r.Patience, "stop after this many epochs without a better dev F1 (0: never)", stages.AtLeast(0)),
		stages.IntParam("seed", int(r.Seed), "seed of the initial weights, batches, dropout and dropped O tokens", stages.AtLeast(0)),
		stages.IntParam("hidden", d.Hidden, "LSTM units per direction", stages.Range(1, 4096)),
		stages.IntParam("layers", d.Layers, "BiLSTM layers", stages.Range(1, 8)),
		stages.IntParam("word_dim", d.WordDim, "word vector size without pretrained vectors (else theirs)", stages.Range(1, 4096)),
		stages.IntParam("char_dim", d.CharDim, "character vector size", stages.Range(1, 1024)),
		stages.IntParam("char_filters", d.CharFilters, "character CNN filters", stages.Range(1, 4096)),
		stages.IntParam("char_kernel", d.CharKernel, "character CNN width (odd)", stages.Range(1, 15)),
		stages.IntParam("casing_dim", d.CasingDim, "casing feature size (0: none)", stages.Range(0, 256)),
		stages.FloatParam("dropout", d.Dropout, "dropout on the word representations and the BiLSTM output", stages.Range(0, 0.95)),
		stages.IntParam("min_word_count", 2, "occurrences a training word without a pretrained vector needs to get its own", stages.AtLeast(1)),
	}
	params = append(params, corpusParams("corpus", "training sentences")...)
	params = append(params, corpusParams("dev", "dev sentences")...)
	stages.Register(stages.Stage{
		Name:    StageTrain,
		Version: 1,
		Doc: "Trains a BiLSTM-CNN tagger (word vectors, character CNN, casing) with RoSTER's token head or a CRF, " +
			"on gold or distant labels: cross entropy, or generalized cross entropy with noisy-label removal and " +
			"dropped O tokens (RoSTER's noise-robust training); early stopping on a dev set; resumes from its last epoch.",
		Params: params,
		Inputs: []stages.Port{
			{Name: "corpus", Kind: "corpus", Doc: "training sentences with tags in any scheme (type \"?\": entity of unknown type)"},
			{Name: "dev", Kind: "corpus", Optional: true, Doc: "sentences with gold tags, for model selection"},
			{Name: "embeddings", Kind: "embeddings", Optional: true, Doc: "pretrained word vectors (stage embeddings.vectors)"},
			{Name: "soft", Kind: "predictions", Optional: true, Doc: "soft targets for loss kl, aligned with corpus (" + PredictionsFile + ", e.g. averaged predictions of several taggers)"},
		},
		Outputs: []stages.Port{
			{Name: "model", Kind: "checkpoint", Doc: TaggerFile + " and " + WeightsFile},
			{Name: "report", Kind: "report", Doc: "report.json: per-epoch loss, dev F1, throughput, removed tokens"},
		},
		Resumable: true,
		Run:       runTrainStage,
	})

	predictParams := append([]stages.Param{
		stages.IntParam("batch_size", 64, "sentences per batch", stages.Range(1, 4096)),
	}, corpusParams("corpus", "sentences to tag")...)
	stages.Register(stages.Stage{
		Name:    StagePredict,
		Version: 1,
		Doc:     "Tags a corpus with a trained tagger: per-token probabilities over the tag set and the best tags.",
		Params:  predictParams,
		Inputs: []stages.Port{
			{Name: "model", Kind: "checkpoint", Doc: "a tagger from " + StageTrain},
			{Name: "corpus", Kind: "corpus", Doc: "sentences to tag (tags, if any, are ignored)"},
		},
		Outputs: []stages.Port{
			{Name: "predictions", Kind: "predictions", Doc: PredictionsFile + ": a header with the tag set, then per sentence the tags and per-token probabilities"},
			{Name: "tagged", Kind: "corpus", Doc: "tagged.conll: the corpus with the predicted tags"},
		},
		Run: runPredictStage,
	})

	evalParams := append([]stages.Param{
		stages.IntParam("batch_size", 64, "sentences per batch when predicting", stages.Range(1, 4096)),
	}, corpusParams("gold", "gold sentences")...)
	stages.Register(stages.Stage{
		Name:    StageEvaluate,
		Version: 1,
		Doc: "Scores a tagger, or predictions, against gold tags: entity-level precision, recall and F1, micro " +
			"and per type, with conlleval's rules.",
		Params: evalParams,
		Inputs: []stages.Port{
			{Name: "gold", Kind: "corpus", Doc: "sentences with gold tags"},
			{Name: "model", Kind: "checkpoint", Optional: true, Doc: "a tagger to run on the gold sentences"},
			{Name: "predictions", Kind: "predictions", Optional: true, Doc: "predictions of the gold sentences (instead of a model)"},
		},
		Outputs: []stages.Port{
			{Name: "report", Kind: "report", Doc: "report.json (eval.Report) and report.txt (a table)"},
		},
		Run: runEvaluateStage,
	})
}

// ParseDevice reads a stage device or flag: "cpu" or "cuda:N".
func ParseDevice(s string) (gotch.Device, error) {
	if s == "" || s == "cpu" {
		return gotch.CPU, nil
	}
	var n uint
	if _, err := fmt.Sscanf(s, "cuda:%d", &n); err != nil {
		return gotch.CPU, fmt.Errorf("device %q: want cpu or cuda:N", s)
	}
	if !gotch.CUDA.IsAvailable() {
		return gotch.CPU, fmt.Errorf("device %s: this libtorch has no CUDA", s)
	}
	return gotch.CudaBuilder(n), nil
}

// stageConfigs reads the architecture and run parameters.
func stageConfigs(p stages.Params) (Config, TrainConfig) {
	m := Config{
		Scheme: p.String("scheme"), Head: p.String("head"),
		WordDim: p.Int("word_dim"), CharDim: p.Int("char_dim"), CharFilters: p.Int("char_filters"),
		CharKernel: p.Int("char_kernel"), MaxWordLen: DefaultConfig().MaxWordLen, CasingDim: p.Int("casing_dim"),
		Hidden: p.Int("hidden"), Layers: p.Int("layers"), Dropout: p.Float("dropout"),
	}
	r := TrainConfig{
		Loss: p.String("loss"), Q: p.Float("q"), Tau: p.Float("tau"), UpdateInterval: p.Int("update_interval"),
		DropO: p.Float("drop_o"), UnknownAsEntity: p.Bool("unknown_as_entity"), Epochs: p.Int("epochs"), BatchSize: p.Int("batch_size"),
		LearningRate: p.Float("learning_rate"), Warmup: p.Float("warmup"), MaxGradNorm: p.Float("max_grad_norm"),
		Patience: p.Int("patience"), Seed: uint64(p.Int("seed")),
	}
	return m, r
}

func runTrainStage(c *stages.Context) error {
	device, err := ParseDevice(c.Device)
	if err != nil {
		return err
	}
	modelCfg, runCfg := stageConfigs(c.Params)
	job := Job{Model: modelCfg, Run: runCfg, Device: device, MinWordCount: c.Params.Int("min_word_count")}
	if job.Train, err = readCorpusInput(c.Input("corpus"), c.Params, "corpus"); err != nil {
		return err
	}
	if in := c.Input("dev"); in != nil {
		if job.Dev, err = readCorpusInput(in, c.Params, "dev"); err != nil {
			return err
		}
	}
	if in := c.Input("embeddings"); in != nil {
		if job.Table, err = readEmbeddings(in); err != nil {
			return err
		}
	}
	if in := c.Input("soft"); in != nil {
		if job.Soft, job.Types, err = readSoftTargets(in, modelCfg.Scheme); err != nil {
			return err
		}
	}

	// Checkpoints: the state of the last finished epoch, restored by the
	// attempt that replaces a dead worker's.
	state := filepath.Join(c.WorkDir(), "state")
	epoch, resumed, err := c.LoadCheckpoint(state)
	if err != nil {
		return err
	}
	warned := false
	save := func(dir string, epoch int) error {
		// Checkpoints are best effort: a store hiccup (or an execution
		// without checkpoints) must not end hours of training; a later
		// attempt resumes from an older checkpoint or starts afresh.
		if err := c.SaveCheckpoint(dir, int64(epoch)); err != nil && !warned {
			c.Log.Warn("no checkpoint", "epoch", epoch, "err", err)
			warned = true
		}
		return nil
	}
	opts := []TrainerOption{
		WithLogger(c.Log),
		WithCheckpoints(state, save),
		WithProgress(func(p Progress) {
			c.Progress(int64(p.Step), int64(p.Steps), fmt.Sprintf("epoch %d/%d, loss %.4f, %.0f tokens/s", p.Epoch, p.Epochs, p.Loss, p.TokensPerSec))
		}),
	}
	if resumed {
		c.Log.Info("resuming training", "epochs_done", epoch)
		opts = append(opts, Resume(state))
	}
	m, res, err := Fit(c, job, opts...)
	if err != nil {
		if c.Err() != nil {
			return err
		}
		return stages.Permanent(err) // bad data or configuration: a retry would fail the same way
	}
	defer m.Close()
	dir := filepath.Join(c.WorkDir(), "model")
	if err := m.Save(dir); err != nil {
		return err
	}
	out := c.Output("model")
	out.SetMeta("head", modelCfg.Head)
	out.SetMeta("scheme", modelCfg.Scheme)
	if err := out.AddDir(dir); err != nil {
		return err
	}
	return c.Output("report").WriteJSON("report.json", map[string]any{"model": m.Config, "run": runCfg, "types": m.Labels.Types, "vocabulary": len(m.Vocab.Words), "pretrained": m.Vocab.Pretrained, "result": res})
}

func runPredictStage(c *stages.Context) error {
	m, err := loadModelInput(c, c.Input("model"))
	if err != nil {
		return err
	}
	defer m.Close()
	text, err := readCorpusInput(c.Input("corpus"), c.Params, "corpus")
	if err != nil {
		return err
	}
	c.Progress(0, int64(len(text.Sentences)), "tagging")
	preds, err := m.Predict(text, c.Params.Int("batch_size"))
	if err != nil {
		return err
	}
	c.Progress(int64(len(text.Sentences)), int64(len(text.Sentences)), "tagged")
	w, err := c.Output("predictions").Create(PredictionsFile)
	if err != nil {
		return err
	}
	if err := WritePredictions(w, m.Labels, preds); err != nil {
		w.Close()
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	tagged := &corpus.Corpus{Sentences: make([]corpus.Sentence, len(preds))}
	for i, p := range preds {
		s := text.Sentences[i]
		tagged.Sentences[i] = corpus.Sentence{Tokens: s.Tokens, Tags: p.Tags, DocStart: s.DocStart}
	}
	out := c.Output("tagged")
	out.SetMeta("scheme", m.Config.Scheme)
	tw, err := out.Create("tagged.conll")
	if err != nil {
		return err
	}
	if err := corpus.Write(tw, tagged, corpus.FormatCoNLL); err != nil {
		tw.Close()
		return err
	}
	return tw.Close()
}

func runEvaluateStage(c *stages.Context) error {
	gold, err := readCorpusInput(c.Input("gold"), c.Params, "gold")
	if err != nil {
		return err
	}
	var pred [][]string
	switch model, preds := c.Input("model"), c.Input("predictions"); {
	case (model == nil) == (preds == nil):
		return stages.Permanent(fmt.Errorf("connect exactly one of the inputs model and predictions"))
	case model != nil:
		m, err := loadModelInput(c, model)
		if err != nil {
			return err
		}
		defer m.Close()
		out, err := m.Predict(gold, c.Params.Int("batch_size"))
		if err != nil {
			return err
		}
		for _, p := range out {
			pred = append(pred, p.Tags)
		}
	default:
		rc, err := preds.Open(PredictionsFile)
		if err != nil {
			return stages.Permanent(err)
		}
		defer rc.Close()
		_, out, err := ReadPredictions(rc, PredictionsFile)
		if err != nil {
			return stages.Permanent(err)
		}
		for _, p := range out {
			pred = append(pred, p.Tags)
		}
	}
	goldTags := make([][]string, len(gold.Sentences))
	for i, s := range gold.Sentences {
		if s.Tags == nil {
			return stages.Permanent(fmt.Errorf("gold sentence %d has no tags", i+1))
		}
		goldTags[i] = s.Tags
	}
	rep, err := eval.Evaluate(goldTags, pred, corpus.AnyScheme)
	if err != nil {
		return stages.Permanent(err)
	}
	c.Log.Info("evaluated", "f1", rep.Micro.F1, "precision", rep.Micro.Precision, "recall", rep.Micro.Recall)
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		return err
	}
	out := c.Output("report")
	out.SetMeta("f1", fmt.Sprintf("%.4f", rep.Micro.F1))
	if err := out.WriteJSON("report.json", rep); err != nil {
		return err
	}
	return out.WriteFile("report.txt", table.Bytes())
}

// readCorpusInput reads a corpus artifact as its port's params say (see
// corpusParams).
func readCorpusInput(in *stages.Input, p stages.Params, port string) (*corpus.Corpus, error) {
	name, labels, format := p.String(port+"_file"), p.String(port+"_labels"), p.String(port+"_format")
	if name == "" {
		if len(in.Files) != 1 {
			return nil, stages.Permanent(fmt.Errorf("input %s has %d files (%s); name the one to read with the param %s_file", port, len(in.Files), fileNames(in), port))
		}
		name = in.Files[0].Name
	}
	f := corpus.Format(format)
	if f == "" {
		var err error
		if f, err = corpus.DetectFormat(name); err != nil {
			return nil, stages.Permanent(fmt.Errorf("input %s: %w", port, err))
		}
	}
	rc, err := in.Open(name)
	if err != nil {
		return nil, stages.Permanent(fmt.Errorf("input %s: %w", port, err))
	}
	defer rc.Close()
	var opts []corpus.Option
	if labels != "" {
		lr, err := in.Open(labels)
		if err != nil {
			return nil, stages.Permanent(fmt.Errorf("input %s: %w", port, err))
		}
		defer lr.Close()
		opts = append(opts, corpus.WithLabels(lr, labels))
	}
	c, err := corpus.Read(rc, name, f, opts...)
	if err != nil {
		return nil, stages.Permanent(fmt.Errorf("input %s: %w", port, err))
	}
	return c, nil
}

// readSoftTargets reads predictions as soft targets, and the entity types
// of their tag set, which must be the tag set of scheme.
func readSoftTargets(in *stages.Input, scheme string) ([][][]float32, []string, error) {
	rc, err := in.Open(PredictionsFile)
	if err != nil {
		return nil, nil, stages.Permanent(fmt.Errorf("input soft: %w", err))
	}
	defer rc.Close()
	tags, preds, err := ReadPredictions(rc, PredictionsFile)
	if err != nil {
		return nil, nil, stages.Permanent(fmt.Errorf("input soft: %w", err))
	}
	types, err := typesOfTagSet(tags, scheme)
	if err != nil {
		return nil, nil, stages.Permanent(fmt.Errorf("input soft: %w", err))
	}
	soft := make([][][]float32, len(preds))
	for i, p := range preds {
		soft[i] = p.Probs
	}
	return soft, types, nil
}

// typesOfTagSet recovers the entity types of a tag set written by a
// tagger of the scheme, checking that it is exactly that scheme's tag set.
func typesOfTagSet(tags []string, scheme string) ([]string, error) {
	sch, err := corpus.ParseScheme(scheme)
	if err != nil {
		return nil, err
	}
	var types []string
	for _, tag := range tags {
		t, err := corpus.ParseTag(tag)
		if err != nil {
			return nil, err
		}
		if t.Prefix != 'O' && (len(types) == 0 || types[len(types)-1] != t.Type) {
			types = append(types, t.Type)
		}
	}
	labels, err := NewLabels(sch, types)
	if err != nil {
		return nil, err
	}
	if strings.Join(labels.Tags, " ") != strings.Join(tags, " ") {
		return nil, fmt.Errorf("tag set %v is not that of a %s tagger (%v)", tags, scheme, labels.Tags)
	}
	return types, nil
}

func fileNames(in *stages.Input) string {
	var names []string
	for _, f := range in.Files {
		names = append(names, f.Name)
	}
	return strings.Join(names, ", ")
}

func readEmbeddings(in *stages.Input) (*embeddings.Table, error) {
	rc, err := in.Open(embeddings.FileName)
	if err != nil {
		return nil, stages.Permanent(fmt.Errorf("input embeddings: %w", err))
	}
	defer rc.Close()
	t, err := embeddings.Read(rc)
	if err != nil {
		return nil, stages.Permanent(fmt.Errorf("input embeddings: %w", err))
	}
	return t, nil
}

// loadModelInput fetches a checkpoint artifact and loads the tagger on the
// stage's device.
func loadModelInput(c *stages.Context, in *stages.Input) (*Tagger, error) {
	device, err := ParseDevice(c.Device)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(c.WorkDir(), "model-")
	if err != nil {
		return nil, err
	}
	if err := in.Fetch(dir); err != nil {
		return nil, err
	}
	m, err := Load(dir, device)
	if err != nil {
		return nil, stages.Permanent(err)
	}
	return m, nil
}
