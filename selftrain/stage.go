package selftrain

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/augment"
	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/kit"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/train/tagger"
)

// StageTagger is the name of the self-training stage.
const StageTagger = "selftrain.tagger"

func init() {
	d := DefaultConfig()
	params := []stages.Param{
		stages.IntParam("epochs", d.Run.Epochs, "self-training epochs", stages.Range(1, 1000)),
		stages.IntParam("update_interval", d.UpdateInterval, "steps between two computations of the targets from the current model", stages.AtLeast(1)),
		stages.FloatParam("entity_threshold", d.Targets.Threshold, "p(entity) under which a token's types are left out of the type loss", stages.Range(0, 1)),
		stages.StringParam("entity_target", d.Targets.Entity, "entity-vs-O target: hard (the model's decision), model (its p(entity)), ensemble (the p(entity) of the input soft, fixed) or sharpen (the model's [p(O), p(entity)] squared and divided by their frequencies, as BOND)", stages.OneOf(EntityTargets...)),
	}
	params = append(params, runParams(d.Run)...)
	stages.Register(stages.Stage{
		Name:    StageTagger,
		Version: 2, // 2: the augmented term keeps the tokens whose type decision the augmentation leaves unchanged
		Doc: "Self-trains a token-head tagger (RoSTER's distilled model) on its own predictions: every update_interval " +
			"steps, types of confident entity tokens squared and divided by their frequency (KL), entity-vs-O " +
			"decisions (binary cross entropy). With language models (input lm), every epoch also fits the types of a new " +
			"contextual augmentation of each sentence to the targets of its original, as RoSTER does.",
		Params: params,
		Inputs: append(inputPorts("the tagger to start from (token head), e.g. the distilled ensemble"),
			stages.Port{Name: "lm", Kind: "lm", Accepts: []string{"encoder"}, Optional: true, Doc: "language models from augment.lm, or an encoder from encoder.pretrain (its masked-LM head): augmented sentences every epoch (RoSTER's rate 15%, top 5, seeded by seed)"},
			stages.Port{Name: "soft", Kind: "predictions", Optional: true, Doc: "the averaged predictions of the seeds on corpus (" + dataset.PredictionsFile + "), whose p(entity) entity_target=ensemble fits"}),
		Outputs:   outputPorts("report.json: per-epoch loss, dev F1, throughput"),
		Resumable: true,
		Run:       runStage,
	})
}

// inputPorts declares the inputs every self-training stage reads: the
// model to start from (model says what it is), the corpus and dev set.
func inputPorts(model string) []stages.Port {
	return []stages.Port{
		{Name: "model", Kind: "checkpoint", Doc: model},
		{Name: "corpus", Kind: "corpus", Doc: "training sentences (their tags are not used)"},
		{Name: "dev", Kind: "corpus", Optional: true, Doc: "sentences with gold tags, for model selection"},
	}
}

// outputPorts declares the outputs of a self-training stage, the model and
// the report (report says what it holds).
func outputPorts(report string) []stages.Port {
	return []stages.Port{
		{Name: "model", Kind: "checkpoint", Doc: tagger.TaggerFile + " and " + tagger.WeightsFile},
		{Name: "report", Kind: "report", Doc: report},
	}
}

// runParams declares the trainer's settings that the self-training stages
// share, with d's defaults, and their corpus and dev inputs' files.
func runParams(d tagger.TrainConfig) []stages.Param {
	params := append(tagger.FitParams(d),
		stages.IntParam("seed", int(d.Seed), "seed of the batches and dropout", stages.AtLeast(0)))
	// The model may carry a fine-tuned encoder (docs/encoder.md).
	params = append(params, tagger.EncoderParams(d)...)
	params = append(params, dataset.SourceParams("corpus", "training sentences")...)
	return append(params, dataset.SourceParams("dev", "dev sentences")...)
}

// readRun reads the parameters of runParams into run.
func readRun(p stages.Params, run *tagger.TrainConfig) {
	run.BatchSize, run.LearningRate, run.Warmup = p.Int("batch_size"), p.Float("learning_rate"), p.Float("warmup")
	run.MaxGradNorm, run.Patience, run.Seed = p.Float("max_grad_norm"), p.Int("patience"), uint64(p.Int("seed"))
	run.EncoderLearningRate, run.EncoderWarmup = p.Float("encoder_learning_rate"), p.Float("encoder_warmup")
}

func configOf(p stages.Params) Config {
	cfg := DefaultConfig()
	cfg.Run.Epochs, cfg.UpdateInterval = p.Int("epochs"), p.Int("update_interval")
	cfg.Targets = Targets{Threshold: p.Float("entity_threshold"), Entity: p.String("entity_target")}
	readRun(p, &cfg.Run)
	return cfg
}

func runStage(c *stages.Context) error {
	cfg := configOf(c.Params)
	return runSelfTraining(c, func(r *round) (any, error) {
		opts := r.opts
		if err := readEnsemble(c, r.model, &cfg.Targets); err != nil {
			return nil, err
		}
		if c.Input("lm") != nil {
			model, err := loadLM(c, r.device)
			if err != nil {
				return nil, err
			}
			defer model.Close()
			acfg := augment.DefaultConfig()
			acfg.Seed = cfg.Run.Seed
			opts = append(opts, WithAugmentation(model, r.text, acfg, c.Log))
		}
		res, err := Train(c, r.model, r.text, r.dev, cfg, opts...)
		if err != nil {
			return nil, c.Failed(err)
		}
		return map[string]any{"self_training": cfg, "types": r.model.Labels.Types, "result": res}, nil
	})
}

// readEnsemble reads the input soft into tg.Ensemble for entity target
// ensemble, which needs it (and only it does).
func readEnsemble(c *stages.Context, m *tagger.Tagger, tg *Targets) error {
	in := c.Input("soft")
	switch {
	case tg.Entity == EntityEnsemble && in == nil:
		return stages.Permanent(fmt.Errorf("entity_target %s needs the input soft (the averaged predictions)", EntityEnsemble))
	case tg.Entity != EntityEnsemble && in != nil:
		return stages.Permanent(fmt.Errorf("input soft is only read with entity_target %s, not %s", EntityEnsemble, tg.Entity))
	case in == nil:
		return nil
	}
	p, err := dataset.ReadPredictionsInput(in, "soft")
	if err != nil {
		return err
	}
	if !slices.Equal(p.Tags, m.Labels.Tags) {
		return stages.Permanent(fmt.Errorf("input soft: tag set %v, the model's is %v", p.Tags, m.Labels.Tags))
	}
	tg.Ensemble = p.Soft()
	return nil
}

// round is what a self-training stage trains: the model of the input model
// (or of the checkpoint it resumes), the corpus and dev inputs, and the
// trainer's options for logging, progress, checkpoints and resuming.
type round struct {
	device    gotch.Device
	model     *tagger.Tagger
	text, dev *corpus.Corpus
	opts      []tagger.TrainerOption
}

// runSelfTraining is the body of a self-training stage: it prepares the
// round, has fit train it and return the report, then writes the outputs
// model and report (report.json).
func runSelfTraining(c *stages.Context, fit func(*round) (any, error)) error {
	device, err := tagger.ParseDevice(c.Device)
	if err != nil {
		return err
	}
	text, err := dataset.ReadInput(c.Input("corpus"), c.Params, "corpus")
	if err != nil {
		return err
	}
	dev, err := readOptional(c, "dev")
	if err != nil {
		return err
	}
	// A retried attempt starts from the last checkpoint's model, so that
	// its first targets are those of the model it resumes.
	fitOpts, _, err := kit.StageOptions(c, "self-training")
	if err != nil {
		return err
	}
	from := filepath.Join(c.WorkDir(), "start")
	if fitOpts.Resume != "" {
		from = fitOpts.Resume
	} else if err := c.Input("model").Fetch(from); err != nil {
		return err
	}
	m, err := tagger.Load(from, device)
	if err != nil {
		return stages.Permanent(fmt.Errorf("input model: %w", err))
	}
	defer m.Close()
	opts := []tagger.TrainerOption{tagger.WithFitOptions(fitOpts)}
	report, err := fit(&round{device: device, model: m, text: text, dev: dev, opts: opts})
	if err != nil {
		return err
	}
	dir := filepath.Join(c.WorkDir(), "model")
	if err := m.Save(dir); err != nil {
		return err
	}
	out := c.Output("model")
	out.SetMeta("head", m.Config.Head)
	out.SetMeta("scheme", m.Config.Scheme)
	if err := out.AddDir(dir); err != nil {
		return err
	}
	return c.Output("report").WriteJSON("report.json", report)
}

// loadLM loads the masked LM of the input lm.
func loadLM(c *stages.Context, device gotch.Device) (augment.MaskedLM, error) {
	dir := filepath.Join(c.WorkDir(), "lm")
	if err := c.Input("lm").Fetch(dir); err != nil {
		return nil, err
	}
	model, err := augment.LoadMaskedLM(dir, device)
	if err != nil {
		return nil, stages.Permanent(fmt.Errorf("input lm: %w", err))
	}
	return model, nil
}

func readOptional(c *stages.Context, port string) (*corpus.Corpus, error) {
	in := c.Input(port)
	if in == nil {
		return nil, nil
	}
	return dataset.ReadInput(in, c.Params, port)
}
