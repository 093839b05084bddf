package tagger

// The stages train.tagger, train.predict and train.evaluate.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/distant"
	"github.com/nerflow/nerflow/embeddings"
	"github.com/nerflow/nerflow/eval"
	"github.com/nerflow/nerflow/kit"
	"github.com/nerflow/nerflow/stages"
)

func init() {
	params := HyperparamDecls()
	params = append(params, dataset.SourceParams("corpus", "training sentences")...)
	params = append(params, dataset.SourceParams("dev", "dev sentences")...)
	params = append(params, dataset.SourceParams("complete", "training sentences, completely annotated")...)
	stages.Register(stages.Stage{
		Name:    StageTrain,
		Version: 2, // 2: patience waits for min_steps (a run stopped before them retrains)
		Doc: "Trains a BiLSTM-CNN tagger (word vectors, character CNN, casing) with RoSTER's token head or a CRF, " +
			"on gold or distant labels: cross entropy, or generalized cross entropy with noisy-label removal and " +
			"dropped O tokens (RoSTER's noise-robust training); or a span classifier with negative sampling for missing " +
			"annotations (head span, loss negsample); early stopping on a dev set; resumes from its last epoch.",
		Params: params,
		Inputs: []stages.Port{
			{Name: "corpus", Kind: "corpus", Doc: "training sentences with tags in any scheme (type \"?\": entity of unknown type)"},
			{Name: "dev", Kind: "corpus", Optional: true, Doc: "sentences with gold tags, for model selection"},
			{Name: "embeddings", Kind: "embeddings", Optional: true, Doc: "pretrained word vectors (stage embeddings.vectors)"},
			{Name: "complete", Kind: "corpus", Optional: true, Doc: "the training sentences completely annotated (the gold before masking, the true labels of distant ones): each epoch reports the share of negative spans drawn by loss negsample that are entities there (missampling)"},
			{Name: "soft", Kind: "predictions", Optional: true, Doc: "soft targets for loss kl, aligned with corpus (" + dataset.PredictionsFile + ", e.g. averaged predictions of several taggers)"},
			{Name: "lm", Kind: "lm", Optional: true, Doc: "TagLM: language models from augment.lm, or an encoder from encoder.pretrain, frozen, whose states join the tagger where lm_placement says"},
			EncoderPort(),
		},
		Outputs: []stages.Port{
			{Name: "model", Kind: "checkpoint", Doc: TaggerFile + ", " + WeightsFile + ", with pretrained vectors " + VectorsFile + ", with a language model its files in lm/, with an encoder its fine-tuned files in encoder/"},
			{Name: "report", Kind: "report", Doc: "report.json: per-epoch loss, dev F1, throughput, removed tokens, negatives drawn and missampling"},
		},
		Resumable: true,
		Run:       runTrainStage,
	})

	predictParams := append([]stages.Param{
		stages.IntParam("batch_size", 64, "sentences per batch", stages.Range(1, 4096)),
	}, dataset.SourceParams("corpus", "sentences to tag")...)
	stages.Register(stages.Stage{
		Name:    StagePredict,
		Version: 2, // 2: the tagged corpus says its format (dataset.Describe)
		Doc:     "Tags a corpus with a trained tagger: per-token probabilities over the tag set and the best tags.",
		Params:  predictParams,
		Inputs: []stages.Port{
			{Name: "model", Kind: "checkpoint", Doc: "a tagger from " + StageTrain},
			{Name: "corpus", Kind: "corpus", Doc: "sentences to tag (tags, if any, are ignored)"},
		},
		Outputs: []stages.Port{
			{Name: "predictions", Kind: "predictions", Doc: dataset.PredictionsFile + ": a header with the tag set, then per sentence the tags and per-token probabilities"},
			{Name: "tagged", Kind: "corpus", Doc: "tagged.conll: the corpus with the predicted tags"},
		},
		Run: runPredictStage,
	})

	evalParams := append([]stages.Param{
		stages.IntParam("batch_size", 64, "sentences per batch when predicting", stages.Range(1, 4096)),
	}, dataset.SourceParams("gold", "gold sentences")...)
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
			{Name: "baseline", Kind: "report", Optional: true, Doc: "the distant labels' report (stage " + distant.StageName + " given the same gold sentences): its score is set beside the model's, type by type, with the gain"},
		},
		Outputs: []stages.Port{
			{Name: "report", Kind: "report", Doc: "report.json (eval.Report, with the baseline's under baseline) and report.txt (a table, then the comparison with the baseline)"},
		},
		Run: runEvaluateStage,
	})
}

func runTrainStage(c *stages.Context) error {
	h := HyperparamsOf(c.Params)
	return Train(c, h, func(job *Job) ([]TrainerOption, map[string]any, error) {
		var err error
		if in := c.Input("soft"); in != nil {
			if job.Soft, job.Types, err = readSoftTargets(in, h.Model.Scheme); err != nil {
				return nil, nil, err
			}
		}
		if in := c.Input("complete"); in != nil {
			if job.Complete, err = dataset.ReadInput(in, c.Params, "complete"); err != nil {
				return nil, nil, err
			}
		}
		if in := c.Input("lm"); in != nil {
			// Loaded last (the encoder after it, by Train): Fit owns the
			// language model from there, and nothing before it can fail
			// and leak it.
			if job.LM, err = loadLM(c, in, job.Device); err != nil {
				return nil, nil, err
			}
		}
		return nil, nil, nil
	})
}

// EncoderPort declares the input encoder of a stage that trains a tagger
// through Train, which loads it.
func EncoderPort() stages.Port {
	return stages.Port{Name: "encoder", Kind: "encoder", Optional: true,
		Doc: "an encoder from encoder.pretrain, fine-tuned with the tagger (encoder_learning_rate; 0: frozen), its states where encoder_placement says; saved fine-tuned with the model"}
}

// loadEncoderInput fetches an encoder (encoder.pretrain's) and loads it on
// device, to be fine-tuned.
func loadEncoderInput(c *stages.Context, in *stages.Input, device gotch.Device) (Encoder, error) {
	return fetchAndLoad(c, in, "encoder-", func(dir string) (Encoder, error) {
		m, err := LoadEncoderDir(dir, device)
		if err != nil {
			return nil, fmt.Errorf("input encoder: %w", err)
		}
		return m, nil
	})
}

// Train is the body of a stage that trains a tagger with h: it reads the
// inputs corpus, dev and embeddings (those connected), trains with
// checkpoints and progress, and writes the outputs model and report, as
// train.tagger does, and the input encoder (EncoderPort) if the stage
// declares it. extend, if not nil, completes the job before training
// and returns more trainer options (a stage's own objective); the report
// then also holds extra.
func Train(c *stages.Context, h Hyperparams, extend func(job *Job) (opts []TrainerOption, extra map[string]any, err error)) error {
	device, err := ParseDevice(c.Device)
	if err != nil {
		return err
	}
	modelCfg, runCfg := h.Model, h.Run
	job := Job{Model: modelCfg, Run: runCfg, Device: device, MinWordCount: h.MinWordCount}
	if job.Train, err = dataset.ReadInput(c.Input("corpus"), c.Params, "corpus"); err != nil {
		return err
	}
	if in := c.Input("dev"); in != nil {
		if job.Dev, err = dataset.ReadInput(in, c.Params, "dev"); err != nil {
			return err
		}
	}
	if in := c.Input("embeddings"); in != nil {
		if job.Table, err = embeddings.ReadInput(in, "embeddings"); err != nil {
			return err
		}
	}

	// Checkpoints: the state of the last finished epoch, restored by the
	// attempt that replaces a dead worker's.
	fit, _, err := kit.StageOptions(c, "training")
	if err != nil {
		return err
	}
	opts := []TrainerOption{WithFitOptions(fit)}
	var extra map[string]any
	if extend != nil {
		more, ex, err := extend(&job)
		if err != nil {
			return err
		}
		opts, extra = append(opts, more...), ex
	}
	if in := c.Input("encoder"); in != nil {
		// Loaded last: Fit owns it from there, and the language model
		// extend may have loaded is closed if this fails.
		if job.Encoder, err = loadEncoderInput(c, in, device); err != nil {
			if job.LM != nil {
				job.LM.Close()
			}
			return err
		}
	}
	m, res, err := Fit(c, job, opts...)
	if err != nil {
		return c.Failed(err)
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
	report := map[string]any{"model": m.Config, "run": runCfg, "types": m.Labels.Types, "vocabulary": len(m.Vocab.Words), "pretrained": m.Vocab.Pretrained, "result": res}
	for k, v := range extra {
		report[k] = v
	}
	return c.Output("report").WriteJSON("report.json", report)
}

func runPredictStage(c *stages.Context) error {
	m, err := loadModelInput(c, c.Input("model"))
	if err != nil {
		return err
	}
	defer m.Close()
	text, err := dataset.ReadInput(c.Input("corpus"), c.Params, "corpus")
	if err != nil {
		return err
	}
	c.Progress(0, int64(len(text.Sentences)), "tagging")
	preds, err := m.Predict(text, c.Params.Int("batch_size"))
	if err != nil {
		return err
	}
	c.Progress(int64(len(text.Sentences)), int64(len(text.Sentences)), "tagged")
	if err := dataset.WritePredictionsOutput(c.Output("predictions"), &dataset.Predictions{Scheme: m.TagSet().Scheme.String(), Tags: m.TagSet().Tags, Sentences: preds}); err != nil {
		return err
	}
	tagged := &corpus.Corpus{Sentences: make([]corpus.Sentence, len(preds))}
	for i, p := range preds {
		s := text.Sentences[i]
		tagged.Sentences[i] = corpus.Sentence{Tokens: s.Tokens, Tags: p.Tags, DocStart: s.DocStart}
	}
	out := c.Output("tagged")
	dataset.Describe(out, corpus.FormatCoNLL, m.TagSet().Scheme)
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
	gold, err := dataset.ReadInput(c.Input("gold"), c.Params, "gold")
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
		p, err := dataset.ReadPredictionsInput(preds, "predictions")
		if err != nil {
			return err
		}
		pred = p.HardTags()
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
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		return err
	}
	out := c.Output("report")
	out.SetMeta("f1", fmt.Sprintf("%.4f", rep.Micro.F1))
	scored := scoredReport{Report: rep}
	logged := []any{"f1", rep.Micro.F1, "precision", rep.Micro.Precision, "recall", rep.Micro.Recall}
	if in := c.Input("baseline"); in != nil {
		base, err := readBaseline(in, len(gold.Sentences))
		if err != nil {
			return err
		}
		scored.Baseline = &base
		table.WriteString("\nagainst the distant labels on the same sentences:\n")
		if err := rep.WriteComparison(&table, base, "labels"); err != nil {
			return err
		}
		out.SetMeta("baseline_f1", fmt.Sprintf("%.4f", base.Micro.F1))
		logged = append(logged, "labels_f1", base.Micro.F1, "gain", rep.Micro.F1-base.Micro.F1)
	}
	c.Log.Info("evaluated", logged...)
	if err := out.WriteJSON("report.json", scored); err != nil {
		return err
	}
	return out.WriteFile("report.txt", table.Bytes())
}

// scoredReport is the evaluation's report.json: an eval.Report (what
// readers of model scores parse), and the baseline's where one was given.
type scoredReport struct {
	eval.Report
	Baseline *eval.Report `json:"baseline,omitempty"`
}

// readBaseline reads the score of the distant labels on the gold sentences
// from a distant-labeling report, which must have scored as many sentences
// as the evaluation has: another split's score would be no baseline.
func readBaseline(in *stages.Input, sentences int) (eval.Report, error) {
	var r distant.Report
	if err := in.ReadJSON("report.json", &r); err != nil {
		return eval.Report{}, fmt.Errorf("baseline: %w", err)
	}
	if r.Gold == nil {
		return eval.Report{}, stages.Permanent(fmt.Errorf("baseline %s: the distant labels were not scored on gold sentences (connect its gold input)", in.Digest))
	}
	if r.Gold.Report.Sentences != sentences {
		return eval.Report{}, stages.Permanent(fmt.Errorf("baseline %s scored %d gold sentences, this evaluation has %d: not the same split", in.Digest, r.Gold.Report.Sentences, sentences))
	}
	return r.Gold.Report, nil
}

// readSoftTargets reads predictions as soft targets, and the entity types
// of their tag set, which must be the tag set of scheme.
func readSoftTargets(in *stages.Input, scheme string) ([][][]float32, []string, error) {
	p, err := dataset.ReadPredictionsInput(in, "soft")
	if err != nil {
		return nil, nil, err
	}
	types, err := typesOfTagSet(p.Tags, scheme)
	if err != nil {
		return nil, nil, stages.Permanent(fmt.Errorf("input soft: %w", err))
	}
	return p.Soft(), types, nil
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

// loadLM fetches a language model (the LSTM pair of augment.lm, or any
// kind registered with RegisterLanguageModelFile, such as the encoder of
// encoder.pretrain) and loads it on device.
func loadLM(c *stages.Context, in *stages.Input, device gotch.Device) (LanguageModel, error) {
	return fetchAndLoad(c, in, "lm-", func(dir string) (LanguageModel, error) {
		m, err := loadLanguageModelDir(dir, device)
		if err != nil {
			return nil, fmt.Errorf("input lm: %w", err)
		}
		return m, nil
	})
}

// loadModelInput fetches a checkpoint artifact and loads the model, of
// any registered kind (LoadModel), on the stage's device.
func loadModelInput(c *stages.Context, in *stages.Input) (Predictor, error) {
	device, err := ParseDevice(c.Device)
	if err != nil {
		return nil, err
	}
	return fetchAndLoad(c, in, "model-", func(dir string) (Predictor, error) { return LoadModel(dir, device) })
}

// fetchAndLoad copies an input artifact into a directory of the work
// directory and loads it from there; what load refuses is bad input, a
// permanent error.
func fetchAndLoad[T any](c *stages.Context, in *stages.Input, prefix string, load func(dir string) (T, error)) (T, error) {
	var zero T
	dir, err := os.MkdirTemp(c.WorkDir(), prefix)
	if err != nil {
		return zero, err
	}
	if err := in.Fetch(dir); err != nil {
		return zero, err
	}
	m, err := load(dir)
	if err != nil {
		return zero, stages.Permanent(err)
	}
	return m, nil
}
