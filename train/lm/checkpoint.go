package lm

import (
	"fmt"
	"path/filepath"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/kit"
)

// Files of a saved language model (an "lm" artifact).
const (
	// ModelFile holds the architecture and the vocabulary (JSON).
	ModelFile = "lm.json"
	// WeightsFile holds the named weights in libtorch's format.
	WeightsFile = "weights.pt"
)

const modelFormat = 1

type modelSpec struct {
	Format int      `json:"format"`
	Config Config   `json:"config"`
	Words  []string `json:"words"`
}

// Save writes the models into dir (created if needed).
func (m *Model) Save(dir string) error {
	err := kit.WriteModelSpec(dir, ModelFile, modelSpec{Format: modelFormat, Config: m.Config, Words: m.Vocab.Words})
	if err == nil {
		err = kit.SaveTensors(m.named(), filepath.Join(dir, WeightsFile))
	}
	if err != nil {
		return fmt.Errorf("saving language model: %w", err)
	}
	return nil
}

// Load reads models saved by Save onto device.
func Load(dir string, device gotch.Device) (*Model, error) {
	var spec modelSpec
	if _, err := kit.ReadModelSpec(dir, ModelFile, modelFormat, modelFormat, &spec); err != nil {
		return nil, fmt.Errorf("loading language model: %w", err)
	}
	if len(spec.Words) <= reserved || spec.Words[Unknown] != "<unk>" || spec.Words[Boundary] != "<s>" {
		return nil, fmt.Errorf("loading language model: %s: no vocabulary", ModelFile)
	}
	v := &Vocab{Words: spec.Words}
	v.reindex()
	m, err := New(spec.Config, v, 0, device)
	if err != nil {
		return nil, fmt.Errorf("loading language model: %w", err)
	}
	if err := m.loadWeights(filepath.Join(dir, WeightsFile)); err != nil {
		m.Close()
		return nil, fmt.Errorf("loading language model: %w", err)
	}
	return m, nil
}

func (m *Model) named() []ts.NamedTensor { return kit.NamedParams(m.vs) }

func (m *Model) loadWeights(path string) error { return kit.LoadWeights(path, m.device, m.named()) }
