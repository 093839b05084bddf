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
}

// Fit builds a model for the job (tag set from the labeled tags, character
// and reconstruction vocabularies from the labeled and unlabeled text, the
// table's vectors fixed) and trains it.
func Fit(ctx context.Context, job Job, o Options) (*Model, *Result, error) {
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
	m, err := New(cfg, labels, vocab, ReconVocab(cfg.ReconWords, text), job.Hyper.Run.Seed, job.Device)
	if err != nil {
		return nil, nil, err
	}
	res, err := Train(ctx, m, job.Labeled, job.Unlabeled, job.Dev, job.Hyper.Run, o)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	return m, res, nil
}
