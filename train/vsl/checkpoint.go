package vsl

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/embeddings"
	"github.com/nerflow/nerflow/kit"
	"github.com/nerflow/nerflow/train/tagger"
)

// Files of a saved model.
const (
	// ModelFile holds the architecture, tag set, vocabularies (JSON).
	ModelFile = "vsl.json"
	// WeightsFile holds the trained weights (libtorch's format).
	WeightsFile = "weights.pt"
	// VectorsFile holds the fixed word vectors (package embeddings' format).
	VectorsFile = embeddings.FileName
)

// modelFormat 2 is a model with a fine-tuned encoder, saved in its
// directory encoder/; one without is still written in format 1.
const (
	modelFormat          = 2
	modelFormatNoEncoder = 1
	encoderDir           = "encoder"
)

type modelSpec struct {
	Format int           `json:"format"`
	Config Config        `json:"config"`
	Types  []string      `json:"types"`
	Vocab  *tagger.Vocab `json:"vocab"`
	Recon  []string      `json:"recon"`
	// Encoder is the kind of the fine-tuned encoder saved in encoder/
	// (format 2).
	Encoder string `json:"encoder,omitempty"`
}

// Save writes the model into dir (created if needed).
func (m *Model) Save(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("saving vsl: %w", err)
	}
	spec := modelSpec{Format: modelFormatNoEncoder, Config: m.Config, Types: m.Labels.Types, Vocab: m.Vocab, Recon: m.Recon[1:]}
	if m.enc != nil {
		spec.Format, spec.Encoder = modelFormat, m.enc.Kind()
		if err := m.enc.Save(filepath.Join(dir, encoderDir)); err != nil {
			return fmt.Errorf("saving vsl: encoder: %w", err)
		}
	}
	err := kit.WriteModelSpec(dir, ModelFile, spec)
	if err == nil {
		err = writeVectors(filepath.Join(dir, VectorsFile), m.Vocab.Frozen())
	}
	if err == nil {
		err = kit.SaveTensors(m.named(), filepath.Join(dir, WeightsFile))
	}
	if err != nil {
		return fmt.Errorf("saving vsl: %w", err)
	}
	return nil
}

func writeVectors(path string, t *embeddings.Table) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := embeddings.Write(f, t); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Load reads a model saved by Save onto device.
func Load(dir string, device gotch.Device) (*Model, error) {
	var spec modelSpec
	if _, err := kit.ReadModelSpec(dir, ModelFile, modelFormatNoEncoder, modelFormat, &spec); err != nil {
		return nil, fmt.Errorf("loading vsl: %w", err)
	}
	if spec.Vocab == nil || len(spec.Vocab.Chars) < 2 {
		return nil, fmt.Errorf("loading vsl: %s: no vocabulary", ModelFile)
	}
	table, err := embeddings.ReadFile(filepath.Join(dir, VectorsFile))
	if err != nil {
		return nil, fmt.Errorf("loading vsl: %w", err)
	}
	spec.Vocab.Restore(table)
	scheme, err := corpus.ParseScheme(spec.Config.Scheme)
	if err != nil {
		return nil, fmt.Errorf("loading vsl: %s: %w", ModelFile, err)
	}
	labels, err := tagger.NewLabels(scheme, spec.Types)
	if err != nil {
		return nil, fmt.Errorf("loading vsl: %s: %w", ModelFile, err)
	}
	var opts []ModelOption
	if spec.Encoder != "" {
		enc, err := tagger.LoadEncoder(spec.Encoder, filepath.Join(dir, encoderDir), device)
		if err != nil {
			return nil, fmt.Errorf("loading vsl: encoder: %w", err)
		}
		opts = append(opts, WithEncoder(enc))
	}
	m, err := New(spec.Config, labels, spec.Vocab, spec.Recon, 0, device, opts...)
	if err != nil {
		return nil, fmt.Errorf("loading vsl: %w", err)
	}
	if err := m.loadWeights(filepath.Join(dir, WeightsFile)); err != nil {
		m.Close()
		return nil, fmt.Errorf("loading vsl: %w", err)
	}
	return m, nil
}

// loadWeights copies the weights saved in path into the model's.
func (m *Model) loadWeights(path string) error { return kit.LoadWeights(path, m.device, m.named()) }
