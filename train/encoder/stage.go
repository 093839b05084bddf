package encoder

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/nerflow/nerflow/augment"
	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/embeddings"
	"github.com/nerflow/nerflow/kit"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/train/tagger"
)

// StagePretrain pretrains an encoder.
const StagePretrain = "encoder.pretrain"

// heldoutEvery: without a heldout input, every heldoutEvery-th sentence of
// the text is held out of training to measure perplexity.
const heldoutEvery = 50

func init() {
	r := DefaultTrainConfig()
	params := augment.UnlabeledParams()
	params = append(params,
		stages.StringParam("preset", DefaultPreset, "model size: tiny, small (the default: a CPU pretraining within an hour), medium, base (GPU)", stages.OneOf(PresetNames()...)),
		stages.IntParam("layers", 0, "transformer layers (0: the preset's)", stages.Range(0, 48)),
		stages.IntParam("dim", 0, "width of the hidden states (0: the preset's)", stages.Range(0, 4096)),
		stages.IntParam("heads", 0, "attention heads (0: the preset's)", stages.Range(0, 64)),
		stages.IntParam("ffn", 0, "inner width of the feed-forward blocks (0: the preset's)", stages.Range(0, 16384)),
		stages.IntParam("max_len", 0, "longest window of tokens read at once (0: the preset's)", stages.Range(0, 4096)),
		stages.BoolParam("post_ln", false, "layer norms after the residual sums (BERT, RoBERTa) instead of before the sublayers"),
		stages.IntParam("max_words", 30000, "vocabulary: the most frequent words of the text (case-sensitive)", stages.Range(10, 1000000)),
		stages.IntParam("min_count", 2, "vocabulary: occurrences a word needs", stages.AtLeast(1)),
		stages.IntParam("epochs", r.Epochs, "passes over the text", stages.Range(1, 1000)),
		stages.IntParam("max_steps", 0, "stop after this many updates (0: the epochs decide; the learning-rate schedule stays that of whole epochs)", stages.AtLeast(0)),
		stages.IntParam("batch_size", r.BatchSize, "sentences per batch", stages.Range(1, 4096)),
		stages.FloatParam("mask_rate", r.Masking.Rate, "fraction of the tokens predicted (80% of them masked, 10% random, 10% kept)", stages.Range(0.01, 1)),
		stages.FloatParam("fraction", 1, "fraction of the training sentences used, evenly spread: quick runs", stages.Range(0.0001, 1)),
		stages.IntParam("seed", int(r.Seed), "seed of the initial weights, batches, masks and dropout", stages.AtLeast(0)),
	)
	params = append(params, tagger.OptimizerParams(r.LearningRate, r.Warmup, r.MaxGradNorm)...)
	params = append(params, dataset.SourceParams("corpus", "text of the run's corpus")...)
	params = append(params, dataset.SourceParams("heldout", "held-out text")...)
	stages.Register(stages.Stage{
		Name:    StagePretrain,
		Version: 1,
		Doc: "Pretrains nerflow's transformer encoder (words and their spellings in, RoBERTa's masked-LM objective, " +
			"output layer tied to the word vectors) on unlabeled text: the run's corpus plus files such as the Brown " +
			"corpus; reports held-out perplexity and tokens/s. Resumes from its last epoch.",
		Params: params,
		Inputs: []stages.Port{
			{Name: "corpus", Kind: "corpus", Optional: true, Doc: "sentences whose tokens are trained on (tags ignored)"},
			{Name: "unlabeled", Kind: "text", Many: true, Optional: true, Doc: "more text: files matching unlabeled_files, in unlabeled_format (by default the Brown corpus's files)"},
			{Name: "heldout", Kind: "corpus", Optional: true, Doc: "text for perplexity (else every 50th sentence of the text is held out)"},
			{Name: "embeddings", Kind: "embeddings", Optional: true, Doc: "word vectors (stage " + embeddings.StageName + ") the input word vectors start from; their width replaces the preset's word_dim"},
		},
		Outputs: []stages.Port{
			{Name: "encoder", Kind: "encoder", Doc: ModelFile + " and " + WeightsFile},
			{Name: "report", Kind: "report", Doc: "report.json: per-epoch loss, held-out perplexity, tokens/s, seconds"},
		},
		Queue:     "gpu",
		Resumable: true,
		Run:       runPretrain,
	})
}

// configOf is the preset with the parameters that override it.
func configOf(p stages.Params) (Config, error) {
	cfg, err := Preset(p.String("preset"))
	if err != nil {
		return cfg, err
	}
	for _, o := range []struct {
		name string
		dst  *int
	}{{"layers", &cfg.Layers}, {"dim", &cfg.Dim}, {"heads", &cfg.Heads}, {"ffn", &cfg.FFN}, {"max_len", &cfg.MaxLen}} {
		if v := p.Int(o.name); v > 0 {
			*o.dst = v
		}
	}
	if p.Bool("post_ln") {
		cfg.PreLN = false
	}
	return cfg, cfg.validate()
}

func runPretrain(c *stages.Context) error {
	device, err := tagger.ParseDevice(c.Device)
	if err != nil {
		return err
	}
	p := c.Params
	cfg, err := configOf(p)
	if err != nil {
		return stages.Permanent(err)
	}
	var text [][]string
	if in := c.Input("corpus"); in != nil {
		cp, err := dataset.ReadInput(in, p, "corpus")
		if err != nil {
			return err
		}
		text = cp.Tokens()
	}
	unlabeled, files, err := augment.ReadUnlabeled(c)
	if err != nil {
		return err
	}
	text = append(text, unlabeled...)
	if len(text) == 0 {
		return stages.Permanent(errors.New("no text: connect a corpus or unlabeled files"))
	}
	var heldout [][]string
	if in := c.Input("heldout"); in != nil {
		h, err := dataset.ReadInput(in, p, "heldout")
		if err != nil {
			return err
		}
		heldout = h.Tokens()
	} else {
		all := text
		text = nil
		for i, s := range all {
			if i%heldoutEvery == heldoutEvery-1 {
				heldout = append(heldout, s)
			} else {
				text = append(text, s)
			}
		}
	}
	text = augment.Every(text, p.Float("fraction"))
	tokens := 0
	for _, s := range text {
		tokens += len(s)
	}
	var table *embeddings.Table
	if in := c.Input("embeddings"); in != nil {
		if table, err = embeddings.ReadInput(in, "embeddings"); err != nil {
			return err
		}
		cfg.WordDim = table.Dim
	}
	c.Log.Info("encoder text", "sentences", len(text), "tokens", tokens, "unlabeled_files", files, "heldout_sentences", len(heldout))

	run := DefaultTrainConfig()
	run.Epochs, run.MaxSteps, run.BatchSize = p.Int("epochs"), p.Int("max_steps"), p.Int("batch_size")
	run.LearningRate, run.Warmup, run.MaxGradNorm = p.Float("learning_rate"), p.Float("warmup"), p.Float("max_grad_norm")
	run.Masking.Rate, run.Seed = p.Float("mask_rate"), uint64(p.Int("seed"))
	vocab := NewVocab(text, p.Int("max_words"), p.Int("min_count"))
	m, err := New(cfg, vocab, table, run.Seed, device)
	if err != nil {
		return stages.Permanent(err)
	}
	defer m.Close()

	opts, epoch, err := kit.StageOptions(c, "encoder pretraining")
	if err != nil {
		return err
	}
	history, err := Train(c, m, text, heldout, run, opts)
	if err != nil {
		return c.Failed(err)
	}
	dir := filepath.Join(c.WorkDir(), "model")
	if err := m.Save(dir); err != nil {
		return err
	}
	out := c.Output("encoder")
	out.SetMeta("words", fmt.Sprint(vocab.Len()))
	out.SetMeta("layers", fmt.Sprint(cfg.Layers))
	out.SetMeta("dim", fmt.Sprint(cfg.Dim))
	if err := out.AddDir(dir); err != nil {
		return err
	}
	rep := c.Output("report")
	var last *Heldout
	if len(history) > 0 {
		last = history[len(history)-1].Heldout
	}
	if last != nil {
		rep.SetMeta("perplexity", fmt.Sprintf("%.1f", last.Perplexity))
	}
	return rep.WriteJSON("report.json", map[string]any{
		"model": cfg, "run": run, "vocabulary": vocab.Len(), "chars": len(vocab.Chars), "training_sentences": len(text),
		"training_tokens": tokens, "unlabeled_sentences": len(unlabeled), "unlabeled_files": files,
		"heldout_sentences": len(heldout), "pretrained_vectors": table != nil, "resumed_epochs": epoch,
		"epochs": history, "heldout": last,
	})
}
