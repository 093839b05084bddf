package tagger

import (
	"context"
	"fmt"
	"slices"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/embeddings"
)

// Job is a complete training job: data, architecture and run.
type Job struct {
	Train *corpus.Corpus
	Dev   *corpus.Corpus // optional: model selection and early stopping
	// Table holds pretrained word vectors (optional).
	Table *embeddings.Table
	// Types are the entity types; empty means those of the training tags.
	Types []string
	// Soft are soft targets for LossKL (see WithSoftTargets).
	Soft   [][][]float32
	Model  Config
	Run    TrainConfig
	Device gotch.Device
	// MinWordCount: see the VocabOption of that name (0: its default).
	MinWordCount int
	// Complete is the complete annotation of Train (optional, see
	// WithCompleteAnnotation).
	Complete *corpus.Corpus
	// LM is TagLM's frozen language model, read where Model.LMPlacement
	// says; the tagger owns it (closed with it, or when Fit fails).
	LM LanguageModel
	// Encoder is fine-tuned under the tagger, read where
	// Model.EncoderPlacement says; the tagger owns it (closed with it, or
	// when Fit fails).
	Encoder Encoder
	// Unlabeled are sentences without tags (for WithUnlabeled) whose words
	// join the vocabulary with the training set's.
	Unlabeled *corpus.Corpus
}

// Fit builds a tagger for the job and trains it. The tagger's initial
// weights come from the run's seed. The job's language model belongs to
// the tagger, or is closed when Fit fails.
func Fit(ctx context.Context, job Job, opts ...TrainerOption) (m *Tagger, res *Result, err error) {
	defer func() {
		if m == nil { // closing twice (after the tagger's Close) is harmless
			if job.LM != nil {
				job.LM.Close()
			}
			if job.Encoder != nil {
				job.Encoder.Close()
			}
		}
	}()
	scheme, err := corpus.ParseScheme(job.Model.Scheme)
	if err != nil {
		return nil, nil, err
	}
	types := job.Types
	if len(types) == 0 {
		if types, err = TypesOf(job.Train); err != nil {
			return nil, nil, fmt.Errorf("training set: %w", err)
		}
	}
	labels, err := NewLabels(scheme, types)
	if err != nil {
		return nil, nil, err
	}
	var vopts []VocabOption
	if job.MinWordCount > 0 {
		vopts = append(vopts, MinWordCount(job.MinWordCount))
	}
	words := job.Train
	if job.Unlabeled != nil {
		words = &corpus.Corpus{Sentences: append(slices.Clip(job.Train.Sentences), job.Unlabeled.Sentences...)}
	}
	var topts []TaggerOption
	if job.LM != nil {
		topts = append(topts, WithLanguageModel(job.LM))
	}
	if job.Encoder != nil {
		topts = append(topts, WithEncoder(job.Encoder))
	}
	m, err = NewTagger(job.Model, NewVocab(words, job.Table, vopts...), labels, job.Table, job.Run.Seed, job.Device, topts...)
	if err != nil {
		return nil, nil, err
	}
	if job.Soft != nil {
		opts = append(opts, WithSoftTargets(job.Soft))
	}
	if job.Complete != nil {
		opts = append(opts, WithCompleteAnnotation(job.Complete))
	}
	tr, err := NewTrainer(m, job.Run, opts...)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	res, err = tr.Run(ctx, job.Train, job.Dev)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	return m, res, nil
}
