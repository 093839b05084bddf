package vsl

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/embeddings"
	"github.com/nerflow/nerflow/train/tagger"
)

// Job is a complete training job.
type Job struct {
	Labeled   *corpus.Corpus
	Unlabeled *corpus.Corpus // optional
	Dev       *corpus.Corpus // optional: model selection
	Table     *embeddings.Table
	Hyper     Hyperparams
	Device    gotch.Device
	// Encoder is a pretrained encoder fine-tuned with the model (optional);
	// the model owns it, or Fit closes it when it fails.
	Encoder tagger.Encoder
}

// Fit builds a model for the job (tag set from the labeled tags, character
// and reconstruction vocabularies from the labeled and unlabeled text, the
// table's vectors fixed) and trains it.
func Fit(ctx context.Context, job Job, o Options) (m *Model, res *Result, err error) {
	if job.Encoder != nil {
		defer func() {
			if m == nil {
				job.Encoder.Close() // closing twice (after the model's Close) is harmless
			}
		}()
	}
	if job.Table == nil {
		return nil, nil, errors.New("vsl: no word vectors")
	}
	cfg := job.Hyper.Model
	scheme, err := corpus.ParseScheme(cfg.Scheme)
	if err != nil {
		return nil, nil, err
	}
	types, err := tagger.TypesOf(job.Labeled)
	if err != nil {
		return nil, nil, fmt.Errorf("labeled set: %w", err)
	}
	labels, err := tagger.NewLabels(scheme, types)
	if err != nil {
		return nil, nil, fmt.Errorf("labeled set: %w", err)
	}
	text := &corpus.Corpus{Sentences: job.Labeled.Sentences}
	if job.Unlabeled != nil {
		text.Sentences = append(text.Sentences[:len(text.Sentences):len(text.Sentences)], job.Unlabeled.Sentences...)
	}
	// Every word keeps its pretrained vector (or is unknown): no word gets
	// a trained row, whatever its count.
	vocab := tagger.NewVocab(text, job.Table, tagger.MinWordCount(math.MaxInt))
	var opts []ModelOption
	if job.Encoder != nil {
		opts = append(opts, WithEncoder(job.Encoder))
	}
	model, err := New(cfg, labels, vocab, ReconVocab(cfg.ReconWords, text), job.Hyper.Run.Seed, job.Device, opts...)
	if err != nil {
		return nil, nil, err
	}
	res, err = Train(ctx, model, job.Labeled, job.Unlabeled, job.Dev, job.Hyper.Run, o)
	if err != nil {
		model.Close()
		return nil, nil, err
	}
	return model, res, nil
}
