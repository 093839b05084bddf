package vsl

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/embeddings"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/train/tagger"
)

// StageTrain is the stage that trains a model; train.predict and
// train.evaluate run it (its kind is registered with tagger.RegisterModelKind).
const StageTrain = "train.vsl"

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
			{Name: "encoder", Kind: "encoder", Optional: true, Doc: "an encoder from encoder.pretrain, fine-tuned with the model (encoder_learning_rate; 0: frozen), its states beside the word vectors at the BiGRU's input; saved fine-tuned with the model"},
		},
		Outputs: []stages.Port{
			{Name: "model", Kind: "checkpoint", Doc: ModelFile + ", " + WeightsFile + " and " + VectorsFile},
			{Name: "report", Kind: "report", Doc: "report.json: per-epoch loss and its parts (reconstruction, KL, classification), KL weight, dev F1, seconds"},
		},
		Run: runTrain,
	})

	tagger.RegisterModelKind(ModelFile, func(dir string, device gotch.Device) (tagger.Predictor, error) {
		m, err := Load(dir, device)
		if err != nil {
			return nil, err
		}
		return m, nil
	})
}

func runTrain(c *stages.Context) error {
	device, err := tagger.ParseDevice(c.Device)
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
	if in := c.Input("encoder"); in != nil {
		// Loaded last: Fit owns it from here.
		dir, err := os.MkdirTemp(c.WorkDir(), "encoder-")
		if err != nil {
			return err
		}
		if err := in.Fetch(dir); err != nil {
			return err
		}
		if job.Encoder, err = tagger.LoadEncoderDir(dir, device); err != nil {
			return stages.Permanent(fmt.Errorf("input encoder: %w", err))
		}
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
