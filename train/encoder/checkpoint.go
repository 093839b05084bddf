package encoder

import (
	"fmt"
	"path/filepath"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/kit"
)

// Files of a saved encoder (an "encoder" artifact).
const (
	// ModelFile holds the architecture and the vocabulary (JSON).
	ModelFile = "encoder.json"
	// WeightsFile holds the named weights in libtorch's format.
	WeightsFile = "weights.pt"
)

const modelFormat = 1

type modelSpec struct {
	Format int      `json:"format"`
	Config Config   `json:"config"`
	Words  []string `json:"words"`
	Chars  []string `json:"chars"`
}

// Save writes the encoder into dir (created if needed).
func (m *Model) Save(dir string) error {
	err := kit.WriteModelSpec(dir, ModelFile, modelSpec{Format: modelFormat, Config: m.Config, Words: m.Vocab.Words, Chars: m.Vocab.Chars})
	if err == nil {
		err = kit.SaveTensors(m.named(), filepath.Join(dir, WeightsFile))
	}
	if err != nil {
		return fmt.Errorf("saving encoder: %w", err)
	}
	return nil
}

// Load reads an encoder saved by Save onto device.
func Load(dir string, device gotch.Device) (*Model, error) {
	var spec modelSpec
	if _, err := kit.ReadModelSpec(dir, ModelFile, modelFormat, modelFormat, &spec); err != nil {
		return nil, fmt.Errorf("loading encoder: %w", err)
	}
	if len(spec.Words) <= reserved || spec.Words[Mask] != "<mask>" || len(spec.Chars) < charsReserved {
		return nil, fmt.Errorf("loading encoder: %s: no vocabulary", ModelFile)
	}
	v := &Vocab{Words: spec.Words, Chars: spec.Chars}
	v.index()
	m, err := New(spec.Config, v, nil, 0, device)
	if err != nil {
		return nil, fmt.Errorf("loading encoder: %w", err)
	}
	if err := m.loadWeights(filepath.Join(dir, WeightsFile)); err != nil {
		m.Close()
		return nil, fmt.Errorf("loading encoder: %w", err)
	}
	return m, nil
}

func (m *Model) named() []ts.NamedTensor { return kit.NamedParams(m.vs) }

func (m *Model) loadWeights(path string) error { return kit.LoadWeights(path, m.device, m.named()) }
