package vsl

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/embeddings"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/train"
)

// Stage names.
const (
	StageTrain   = "train.vsl"
	StagePredict = "vsl.predict"
)

func init() {
	params := HyperparamDecls()
	params = append(params, dataset.SourceParams("corpus", "labeled sentences")...)
	params = append(params, dataset.SourceParams("unlabeled", "unlabeled sentences")...)
	params = append(params, dataset.SourceParams("dev", "dev sentences")...)
	stages.Register(stages.Stage{
		Name:    StageTrain,
		Version: 1,
		Doc: "Trains a variational sequential labeler (Chen et al., 2018): a BiGRU over fixed word vectors and a " +
			"character CNN, per-token Gaussian latents (hier: z conditioned on y; flat), a classifier on y, the words " +
			"reconstructed from the latents; labeled sentences add the classification loss to the ELBO, unlabeled " +
			"ones the ELBO alone, with KL annealing; the best epoch on the dev set is kept.",
		Params: params,
		Inputs: []stages.Port{
			{Name: "corpus", Kind: "corpus", Doc: "labeled training sentences, tags in any scheme (type \"?\": no classification loss)"},
			{Name: "unlabeled", Kind: "text", Optional: true, Doc: "unlabeled sentences (e.g. " + "subset.split's unlabeled part); tags, if any, are ignored"},
			{Name: "dev", Kind: "corpus", Optional: true, Doc: "sentences with gold tags, for model selection"},
			{Name: "embeddings", Kind: "embeddings", Doc: "pretrained word vectors (stage " + embeddings.StageName + "), fixed in training"},
		},
		Outputs: []stages.Port{
			{Name: "model", Kind: "vsl", Doc: ModelFile + ", " + WeightsFile + " and " + VectorsFile},
			{Name: "report", Kind: "report", Doc: "report.json: per-epoch loss and its parts (reconstruction, KL, classification), KL weight, dev F1, seconds"},
		},
		Run: runTrain,
	})

	predictParams := append([]stages.Param{
		stages.IntParam("batch_size", 64, "sentences per batch", stages.Range(1, 4096)),
	}, dataset.SourceParams("corpus", "sentences to tag")...)
	stages.Register(stages.Stage{
		Name:    StagePredict,
		Version: 1,
		Doc:     "Tags a corpus with a trained variational sequential labeler: the classifier on the mean of y, per-token probabilities over the tag set and the best tags.",
		Params:  predictParams,
		Inputs: []stages.Port{
			{Name: "model", Kind: "vsl", Doc: "a model from " + StageTrain},
			{Name: "corpus", Kind: "corpus", Doc: "sentences to tag (tags, if any, are ignored)"},
		},
		Outputs: []stages.Port{
			{Name: "predictions", Kind: "predictions", Doc: dataset.PredictionsFile + " (docs/predictions.md), for " + train.StageEvaluate},
		},
		Run: runPredict,
	})
}

func runTrain(c *stages.Context) error {
	device, err := train.ParseDevice(c.Device)
	if err != nil {
		return err
	}
	job := Job{Hyper: HyperparamsOf(c.Params), Device: device}
	if job.Labeled, err = dataset.ReadInput(c.Input("corpus"), c.Params, "corpus"); err != nil {
		return err
	}
	if in := c.Input("unlabeled"); in != nil {
		if job.Unlabeled, err = dataset.ReadInput(in, c.Params, "unlabeled"); err != nil {
			return err
		}
	}
	if in := c.Input("dev"); in != nil {
		if job.Dev, err = dataset.ReadInput(in, c.Params, "dev"); err != nil {
			return err
		}
	}
	if job.Table, err = embeddings.ReadInput(c.Input("embeddings"), "embeddings"); err != nil {
		return err
	}
	m, res, err := Fit(c, job, Options{Log: c.Log, Progress: func(p Progress) {
		c.Progress(int64(p.Step), int64(p.Steps), fmt.Sprintf("epoch %d/%d, loss %.4f", p.Epoch, p.Epochs, p.Loss))
	}})
	if err != nil {
		return c.Failed(err)
	}
	defer m.Close()
	dir := filepath.Join(c.WorkDir(), "model")
	if err := m.Save(dir); err != nil {
		return err
	}
	out := c.Output("model")
	out.SetMeta("variant", m.Config.Variant)
	out.SetMeta("scheme", m.Config.Scheme)
	if err := out.AddDir(dir); err != nil {
		return err
	}
	unlabeled := 0
	if job.Unlabeled != nil {
		unlabeled = len(job.Unlabeled.Sentences)
	}
	rep := c.Output("report")
	if res.BestEpoch > 0 {
		rep.SetMeta("dev_f1", fmt.Sprintf("%.4f", res.BestDevF1))
	}
	return rep.WriteJSON("report.json", map[string]any{"model": m.Config, "run": job.Hyper.Run, "types": m.Labels.Types,
		"labeled": len(job.Labeled.Sentences), "unlabeled": unlabeled, "recon_words": len(m.Recon), "result": res})
}

func runPredict(c *stages.Context) error {
	device, err := train.ParseDevice(c.Device)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp(c.WorkDir(), "model-")
	if err != nil {
		return err
	}
	if err := c.Input("model").Fetch(dir); err != nil {
		return err
	}
	m, err := Load(dir, device)
	if err != nil {
		return stages.Permanent(fmt.Errorf("input model: %w", err))
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
	return dataset.WritePredictionsOutput(c.Output("predictions"), &dataset.Predictions{Scheme: m.Labels.Scheme.String(), Tags: m.Labels.Tags, Sentences: preds})
}
