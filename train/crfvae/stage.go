package crfvae

import (
	"errors"
	"slices"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/train/tagger"
)

// StageName is the stage that trains a CRF tagger as the CRF-VAE's
// posterior.
const StageName = "train.crfvae"

// Hyperparams are the tagger's defaults for the CRF-VAE: the CRF head
// (the posterior must be a CRF) and its loss.
func Hyperparams() tagger.Hyperparams {
	h := tagger.DefaultHyperparams()
	h.Model.Head, h.Model.Scheme, h.Run.Loss = tagger.CRFHead, "bio", tagger.LossCRF
	return h
}

func init() {
	params := Hyperparams().Decls()
	params = append(params, ConfigDecls()...)
	params = append(params, dataset.SourceParams("corpus", "labeled training sentences")...)
	params = append(params, dataset.SourceParams("dev", "dev sentences")...)
	params = append(params, dataset.SourceParams("unlabeled", "unlabeled sentences")...)
	params = append(params, stages.BoolParam("corpus_unlabeled", false,
		"the corpus's sentences are unlabeled sentences too (a partially annotated corpus, with drop_o 1)"))
	stages.Register(stages.Stage{
		Name:    StageName,
		Version: 1,
		Doc: "Trains a BiLSTM-CNN-CRF tagger semi-supervised as the posterior of a CRF-VAE: the CRF loss on the " +
			"labeled sentences (with drop_o 1, the marginal likelihood of the entity tags of a partially annotated " +
			"corpus) plus the negative ELBO of the unlabeled ones, with relaxed perturb-and-MAP samples of the tags " +
			"and a generative model of the tokens given the tags. The model is an ordinary tagger (train.predict, train.evaluate).",
		Params: params,
		Inputs: []stages.Port{
			{Name: "corpus", Kind: "corpus", Doc: "labeled (or partially annotated) training sentences, tags in any scheme"},
			{Name: "unlabeled", Kind: "text", Optional: true, Doc: "unlabeled sentences (e.g. subset.split's), one a line or in any corpus format; tags, if any, are not used"},
			{Name: "dev", Kind: "corpus", Optional: true, Doc: "sentences with gold tags, for model selection"},
			{Name: "embeddings", Kind: "embeddings", Optional: true, Doc: "pretrained word vectors (stage embeddings.vectors)"},
			tagger.EncoderPort(),
		},
		Outputs: []stages.Port{
			{Name: "model", Kind: "checkpoint", Doc: "the posterior tagger, as " + tagger.StageTrain + " writes it"},
			{Name: "report", Kind: "report", Doc: "report.json: per-epoch loss (CRF loss plus weighted negative ELBO), dev F1, the CRF-VAE's config"},
		},
		Resumable: true,
		Run:       run,
	})
}

func run(c *stages.Context) error {
	h := tagger.HyperparamsOf(c.Params)
	cfg := ConfigOf(c.Params)
	unlabeled := &corpus.Corpus{}
	if in := c.Input("unlabeled"); in != nil {
		var err error
		if unlabeled, err = dataset.ReadInput(in, c.Params, "unlabeled"); err != nil {
			return err
		}
	}
	corpusToo := c.Params.Bool("corpus_unlabeled")
	if !corpusToo && len(unlabeled.Sentences) == 0 {
		return stages.Permanent(errors.New("no unlabeled sentences: connect the input unlabeled, or set corpus_unlabeled"))
	}
	var obj *Objective
	defer func() {
		if obj != nil {
			obj.Close()
		}
	}()
	return tagger.Train(c, h, func(job *tagger.Job) ([]tagger.TrainerOption, map[string]any, error) {
		if corpusToo {
			unlabeled = &corpus.Corpus{Sentences: append(slices.Clip(job.Train.Sentences), unlabeled.Sentences...)}
		}
		var err error
		if obj, err = NewObjective(cfg, unlabeled, h.Run.Seed); err != nil {
			return nil, nil, stages.Permanent(err)
		}
		job.Unlabeled = unlabeled
		c.Log.Info("crfvae", "unlabeled", len(unlabeled.Sentences), "generator", cfg.Generator, "generated_words", obj.vocab.size())
		extra := map[string]any{"crfvae": cfg, "unlabeled": len(unlabeled.Sentences), "generated_words": obj.vocab.size()}
		return []tagger.TrainerOption{tagger.WithUnlabeled(unlabeled, obj, cfg.Weight)}, extra, nil
	})
}
