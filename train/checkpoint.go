package train

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/corpus"
)

// Files of a saved tagger (a "checkpoint" artifact).
const (
	// TaggerFile holds the architecture, vocabulary and tag set (JSON).
	TaggerFile = "tagger.json"
	// WeightsFile holds the named weights in libtorch's format.
	WeightsFile = "weights.pt"
)

const taggerFormat = 1

type taggerSpec struct {
	Format int      `json:"format"`
	Config Config   `json:"config"`
	Types  []string `json:"types"`
	Vocab  *Vocab   `json:"vocab"`
}

// Save writes the tagger into dir (created if needed): TaggerFile and
// WeightsFile.
func (m *Tagger) Save(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("saving tagger: %w", err)
	}
	spec := taggerSpec{Format: taggerFormat, Config: m.Config, Types: m.Labels.Types, Vocab: m.Vocab}
	b, err := json.Marshal(spec)
	if err != nil {
		return fmt.Errorf("saving tagger: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, TaggerFile), b, 0o644); err != nil {
		return fmt.Errorf("saving tagger: %w", err)
	}
	return m.saveWeights(filepath.Join(dir, WeightsFile))
}

// Load reads a tagger saved by Save onto device.
func Load(dir string, device gotch.Device) (*Tagger, error) {
	b, err := os.ReadFile(filepath.Join(dir, TaggerFile))
	if err != nil {
		return nil, fmt.Errorf("loading tagger: %w", err)
	}
	var spec taggerSpec
	if err := json.Unmarshal(b, &spec); err != nil {
		return nil, fmt.Errorf("loading tagger: %s: %w", TaggerFile, err)
	}
	if spec.Format != taggerFormat {
		return nil, fmt.Errorf("loading tagger: %s: format %d, this build reads %d", TaggerFile, spec.Format, taggerFormat)
	}
	if spec.Vocab == nil || len(spec.Vocab.Words) == 0 || len(spec.Vocab.Chars) < 2 {
		return nil, fmt.Errorf("loading tagger: %s: no vocabulary", TaggerFile)
	}
	spec.Vocab.index()
	scheme, err := corpus.ParseScheme(spec.Config.Scheme)
	if err != nil {
		return nil, fmt.Errorf("loading tagger: %s: %w", TaggerFile, err)
	}
	labels, err := NewLabels(scheme, spec.Types)
	if err != nil {
		return nil, fmt.Errorf("loading tagger: %s: %w", TaggerFile, err)
	}
	m, err := NewTagger(spec.Config, spec.Vocab, labels, nil, 0, device)
	if err != nil {
		return nil, fmt.Errorf("loading tagger: %w", err)
	}
	if err := m.loadWeights(filepath.Join(dir, WeightsFile)); err != nil {
		m.Close()
		return nil, fmt.Errorf("loading tagger: %w", err)
	}
	return m, nil
}

// paramNames returns the names of the tagger's weights, sorted.
func (m *Tagger) paramNames() []string {
	var names []string
	for name := range m.vs.Variables() {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

func (m *Tagger) namedWeights() []ts.NamedTensor {
	var out []ts.NamedTensor
	for _, name := range m.paramNames() {
		p, _ := m.vs.Root().Get(name)
		out = append(out, ts.NamedTensor{Name: name, Tensor: p})
	}
	return out
}

func (m *Tagger) saveWeights(path string) error {
	if err := saveTensors(m.namedWeights(), path); err != nil {
		return fmt.Errorf("saving weights: %w", err)
	}
	return nil
}

func (m *Tagger) loadWeights(path string) error {
	saved, err := loadTensors(path, m.device)
	if err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	defer dropAll(saved)
	byName := map[string]*ts.Tensor{}
	for _, nt := range saved {
		byName[nt.Name] = nt.Tensor
	}
	for _, w := range m.namedWeights() {
		src, ok := byName[w.Name]
		if !ok {
			return fmt.Errorf("%s: no weight %q", filepath.Base(path), w.Name)
		}
		if err := copyInto(w.Tensor, src); err != nil {
			return fmt.Errorf("%s: weight %q: %w", filepath.Base(path), w.Name, err)
		}
	}
	if len(saved) != len(byName) || len(byName) != len(m.paramNames()) {
		return fmt.Errorf("%s: %d weights, the tagger has %d", filepath.Base(path), len(saved), len(m.paramNames()))
	}
	return nil
}

// saveTensors writes named tensors in libtorch's format, atomically.
func saveTensors(named []ts.NamedTensor, path string) error {
	tmp := path + ".tmp"
	if err := ts.SaveMultiNew(named, tmp); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func loadTensors(path string, device gotch.Device) ([]ts.NamedTensor, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, err // libtorch's message for a missing file is obscure
	}
	named, err := ts.LoadMultiWithDevice(path, device)
	if err != nil {
		return nil, err
	}
	if len(named) == 0 {
		return nil, errors.New("no tensors")
	}
	return named, nil
}

func dropAll(named []ts.NamedTensor) {
	for _, nt := range named {
		_ = nt.Tensor.Drop()
	}
}
