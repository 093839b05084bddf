package tagger

import (
	"encoding/json"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/embeddings"
	"github.com/nerflow/nerflow/kit"
	"github.com/nerflow/nerflow/train/overlay"
)

// Files of a saved tagger (a "checkpoint" artifact).
const (
	// TaggerFile holds the architecture, vocabulary and tag set (JSON).
	TaggerFile = "tagger.json"
	// WeightsFile holds the named weights in libtorch's format.
	WeightsFile = "weights.pt"
	// VectorsFile holds the frozen pretrained table (package embeddings'
	// format), when the tagger was trained with one.
	VectorsFile = "vectors.bin"
)

// taggerFormat is the version of TaggerFile. Format 2 keeps the pretrained
// vectors outside the training vocabulary frozen in VectorsFile; format 1
// (every pretrained row trained, no VectorsFile) still loads. Format 3 is
// a tagger with a language model (TagLM), saved in its directory lm/; a
// tagger without one is still written in format 2, which older builds read.
// Format 4 is a tagger with a fine-tuned encoder, saved in its directory
// encoder/ (the tagger's own weights in WeightsFile, the encoder's there).
const (
	taggerFormat     = 4
	taggerFormatLM   = 3
	taggerFormatNoLM = 2
)

type taggerSpec struct {
	Format int      `json:"format"`
	Config Config   `json:"config"`
	Types  []string `json:"types"`
	Vocab  *Vocab   `json:"vocab"`
	// Vectors names VectorsFile when the vocabulary has a frozen table;
	// VectorsCRC is its checksum (see tableChecksum).
	Vectors    string `json:"vectors,omitempty"`
	VectorsCRC uint32 `json:"vectors_crc,omitempty"`
	// LM points at the language model saved with the tagger (format 3).
	LM *lmRef `json:"lm,omitempty"`
	// Encoder points at the fine-tuned encoder saved with the tagger
	// (format 4).
	Encoder *lmRef `json:"encoder,omitempty"`
}

// Save writes the tagger into dir (created if needed): TaggerFile and
// WeightsFile, VectorsFile with a frozen table, the language model's files
// in lm/ with one, the encoder's (its fine-tuned weights, its
// architecture and vocabulary) in encoder/ with one, and its overlay in
// overlay.Dir with one, so that the checkpoint tags on its own.
func (m *Tagger) Save(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("saving tagger: %w", err)
	}
	spec := taggerSpec{Format: taggerFormatNoLM, Config: m.Config, Types: m.Labels.Types, Vocab: m.Vocab}
	if m.lm != nil {
		spec.Format, spec.LM = taggerFormatLM, &lmRef{Kind: m.lm.Kind(), Dir: lmDir}
		if err := m.lm.Save(filepath.Join(dir, lmDir)); err != nil {
			return fmt.Errorf("saving tagger: %w", err)
		}
	}
	if m.enc != nil {
		spec.Format, spec.Encoder = taggerFormat, &lmRef{Kind: m.enc.Kind(), Dir: encoderDir}
		if err := m.enc.Save(filepath.Join(dir, encoderDir)); err != nil {
			return fmt.Errorf("saving tagger: encoder: %w", err)
		}
	}
	if t := m.Vocab.Frozen(); t != nil {
		spec.Vectors, spec.VectorsCRC = VectorsFile, tableChecksum(t)
		if err := saveVectors(dir, t); err != nil {
			return fmt.Errorf("saving tagger: %w", err)
		}
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return fmt.Errorf("saving tagger: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, TaggerFile), b, 0o644); err != nil {
		return fmt.Errorf("saving tagger: %w", err)
	}
	if err := kit.SaveTensors(m.ownWeights(), filepath.Join(dir, WeightsFile)); err != nil {
		return fmt.Errorf("saving tagger: weights: %w", err)
	}
	if m.overlay != nil {
		if err := m.overlay.Write(dir); err != nil {
			return fmt.Errorf("saving tagger: %w", err)
		}
	}
	return nil
}

// Load reads a tagger saved by Save onto device, with its overlay when the
// checkpoint has one (the overlay's kind must be registered: package
// distant registers the gazetteer's).
func Load(dir string, device gotch.Device) (*Tagger, error) {
	b, err := os.ReadFile(filepath.Join(dir, TaggerFile))
	if err != nil {
		return nil, fmt.Errorf("loading tagger: %w", err)
	}
	var spec taggerSpec
	if err := json.Unmarshal(b, &spec); err != nil {
		return nil, fmt.Errorf("loading tagger: %s: %w", TaggerFile, err)
	}
	if spec.Format < 1 || spec.Format > taggerFormat {
		return nil, fmt.Errorf("loading tagger: %s: format %d, this build reads 1 to %d", TaggerFile, spec.Format, taggerFormat)
	}
	if spec.Vocab == nil || len(spec.Vocab.Words) == 0 || len(spec.Vocab.Chars) < 2 {
		return nil, fmt.Errorf("loading tagger: %s: no vocabulary", TaggerFile)
	}
	var frozen *embeddings.Table
	if spec.Vectors != "" {
		if spec.Vectors != VectorsFile {
			return nil, fmt.Errorf("loading tagger: %s: vectors file %q, want %q", TaggerFile, spec.Vectors, VectorsFile)
		}
		t, err := embeddings.ReadFile(filepath.Join(dir, VectorsFile))
		if err != nil {
			return nil, fmt.Errorf("loading tagger: %w", err)
		}
		if sum := tableChecksum(t); sum != spec.VectorsCRC {
			return nil, fmt.Errorf("loading tagger: %s: checksum %08x, %s records %08x (saved by another training?)", VectorsFile, sum, TaggerFile, spec.VectorsCRC)
		}
		frozen = t
	}
	spec.Vocab.Restore(frozen)
	scheme, err := corpus.ParseScheme(spec.Config.Scheme)
	if err != nil {
		return nil, fmt.Errorf("loading tagger: %s: %w", TaggerFile, err)
	}
	labels, err := NewLabels(scheme, spec.Types)
	if err != nil {
		return nil, fmt.Errorf("loading tagger: %s: %w", TaggerFile, err)
	}
	// What the tagger reads beside its own weights, closed by NewTagger
	// when it fails, by the tagger after.
	var opts []TaggerOption
	if spec.Encoder != nil {
		if spec.Encoder.Dir != encoderDir {
			return nil, fmt.Errorf("loading tagger: %s: encoder directory %q, want %q", TaggerFile, spec.Encoder.Dir, encoderDir)
		}
		enc, err := LoadEncoder(spec.Encoder.Kind, filepath.Join(dir, encoderDir), device)
		if err != nil {
			return nil, fmt.Errorf("loading tagger: encoder: %w", err)
		}
		opts = append(opts, WithEncoder(enc))
	}
	if spec.LM != nil {
		lm, err := loadLanguageModel(dir, spec.LM, device)
		if err != nil {
			for _, o := range opts {
				t := &Tagger{}
				o(t)
				t.Close()
			}
			return nil, fmt.Errorf("loading tagger: %w", err)
		}
		opts = append(opts, WithLanguageModel(lm))
	}
	m, err := NewTagger(spec.Config, spec.Vocab, labels, nil, 0, device, opts...)
	if err != nil {
		return nil, fmt.Errorf("loading tagger: %w", err)
	}
	if err := kit.LoadWeights(filepath.Join(dir, WeightsFile), m.device, m.ownWeights()); err != nil {
		m.Close()
		return nil, fmt.Errorf("loading tagger: %w", err)
	}
	if m.overlay, err = overlay.Read(dir); err != nil {
		m.Close()
		return nil, fmt.Errorf("loading tagger: %w", err)
	}
	return m, nil
}

// tableChecksum is the CRC-32 of a table's words and vectors.
func tableChecksum(t *embeddings.Table) uint32 {
	h := crc32.NewIEEE()
	for _, w := range t.Words {
		h.Write([]byte(w))
		h.Write([]byte{0})
	}
	h.Write(kit.BytesOf(t.Vectors))
	return h.Sum32()
}

// saveVectors writes the frozen table into dir.
func saveVectors(dir string, t *embeddings.Table) error {
	path := filepath.Join(dir, VectorsFile)
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if err := embeddings.Write(f, t); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// ownWeights are the tagger's weights without its encoder's.
func (m *Tagger) ownWeights() []ts.NamedTensor { return kit.NamedParams(m.vs) }

// Weights are all the tagger's weights by name: its own and its encoder's,
// prefixed EncoderWeightPrefix (what a training run checkpoints). They
// belong to the tagger.
func (m *Tagger) Weights() []ts.NamedTensor { return m.namedWeights() }

// namedWeights are all the weights a training run checkpoints: the
// tagger's own and its encoder's.
func (m *Tagger) namedWeights() []ts.NamedTensor {
	return append(m.ownWeights(), m.encoderWeights()...)
}

func (m *Tagger) saveWeights(path string) error {
	if err := kit.SaveTensors(m.namedWeights(), path); err != nil {
		return fmt.Errorf("saving weights: %w", err)
	}
	return nil
}

func (m *Tagger) loadWeights(path string) error {
	return kit.LoadWeights(path, m.device, m.namedWeights())
}
