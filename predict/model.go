// Package predict serves a trained tagger: it loads one from its checkpoint
// artifact (without the stage registry), tokenizes raw text, batches the
// sentences of concurrent requests into one forward pass, and returns entity
// spans with their type and a confidence. `nerflow serve` answers
// POST /v1/predict with it, and the stage predict.entities runs it over a
// corpus.
package predict

import (
	"context"
	"fmt"
	"os"
	"slices"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/storage"
	"github.com/nerflow/nerflow/train/tagger"
)

// Info identifies the model that answered.
type Info struct {
	// Name and Version are the registry's, when the model came from it.
	Name    string `json:"name,omitempty"`
	Version string `json:"version,omitempty"`
	// Digest is the checkpoint artifact's content digest.
	Digest string   `json:"digest,omitempty"`
	Scheme string   `json:"scheme"`
	Types  []string `json:"types"`
	// Overlay is the mode in which the checkpoint's overlay (a gazetteer's
	// matches, see package overlay) combines with the tagger's entities;
	// empty without one.
	Overlay string `json:"overlay,omitempty"`
}

// Model is a loaded tagger with what decoding needs.
type Model struct {
	Info   Info
	tagger *tagger.Tagger
}

// NewModel wraps a loaded tagger; the Model owns it from then on.
func NewModel(t *tagger.Tagger, info Info) *Model {
	info.Scheme = t.Labels.Scheme.String()
	info.Types = slices.Clone(t.Labels.Types)
	info.Overlay = string(t.OverlayMode())
	return &Model{Info: info, tagger: t}
}

// LoadDir loads a tagger saved in dir (tagger.Tagger.Save's files).
func LoadDir(dir string, device gotch.Device, info Info) (*Model, error) {
	t, err := tagger.Load(dir, device)
	if err != nil {
		return nil, err
	}
	return NewModel(t, info), nil
}

// LoadArtifact fetches a checkpoint artifact from the store and loads it.
// Its files are verified against the manifest as they are read.
func LoadArtifact(ctx context.Context, st storage.Store, art stages.Artifact, device gotch.Device, info Info) (*Model, error) {
	return LoadInput(stages.NewInput(ctx, st, art), device, info)
}

// LoadInput loads the tagger of a checkpoint input.
func LoadInput(in *stages.Input, device gotch.Device, info Info) (*Model, error) {
	if in.Kind != "" && in.Kind != "checkpoint" {
		return nil, fmt.Errorf("loading model %s: artifact is a %s, not a checkpoint", in.Prefix, in.Kind)
	}
	if _, ok := in.File(tagger.TaggerFile); !ok {
		return nil, fmt.Errorf("loading model %s: no %s in the artifact (not a tagger from %s?)", in.Prefix, tagger.TaggerFile, tagger.StageTrain)
	}
	dir, err := os.MkdirTemp("", "nerflow-model-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := in.Fetch(dir); err != nil {
		return nil, fmt.Errorf("loading model %s: %w", in.Prefix, err)
	}
	info.Digest = in.Digest
	return LoadDir(dir, device, info)
}

// Close frees the tagger's weights.
func (m *Model) Close() { m.tagger.Close() }

// Entity is an entity mention found in a sentence.
type Entity struct {
	Type string `json:"type"`
	Text string `json:"text"`
	// Start and End are byte offsets into the request's text (absent for
	// pre-tokenized input); TokenStart and TokenEnd index the sentence's
	// tokens, end exclusive.
	Start      int `json:"start"`
	End        int `json:"end"`
	TokenStart int `json:"token_start"`
	TokenEnd   int `json:"token_end"`
	// Confidence is the mean, over the entity's tokens, of the probability
	// the tagger gives the tag it chose (the CRF's marginal for a CRF).
	// Where an overlay changed a token's tag, the probability is half the
	// tagger's own plus one half (overlay.Weight).
	Confidence float64 `json:"confidence"`
}

// tag runs the tagger over sentences in batches of batchSize. The caller
// serializes calls (Batcher does).
func (m *Model) tag(sents [][]string, batchSize int) ([]dataset.Prediction, error) {
	c := &corpus.Corpus{Sentences: make([]corpus.Sentence, len(sents))}
	for i, s := range sents {
		c.Sentences[i].Tokens = s
	}
	return m.tagger.Predict(c, batchSize)
}

// entities decodes one sentence's prediction into entity spans. text and
// toks locate them in the raw text (toks nil for pre-tokenized input).
func (m *Model) entities(words []string, p dataset.Prediction, text string, toks []Token) ([]Entity, error) {
	spans, err := m.tagger.Labels.Scheme.Spans(p.Tags)
	if err != nil {
		return nil, fmt.Errorf("decoding tags: %w", err)
	}
	out := make([]Entity, 0, len(spans))
	for _, sp := range spans {
		e := Entity{Type: sp.Label, TokenStart: sp.Start, TokenEnd: sp.End}
		sum := 0.0
		for t := sp.Start; t < sp.End; t++ {
			if k, ok := m.tagger.Labels.Index(p.Tags[t]); ok {
				sum += float64(p.Probs[t][k])
			}
		}
		e.Confidence = sum / float64(sp.End-sp.Start)
		if toks != nil {
			e.Start, e.End = toks[sp.Start].Start, toks[sp.End-1].End
			e.Text = text[e.Start:e.End]
		} else {
			e.Start, e.End = -1, -1
			for t := sp.Start; t < sp.End; t++ {
				if t > sp.Start {
					e.Text += " "
				}
				e.Text += words[t]
			}
		}
		out = append(out, e)
	}
	return out, nil
}
