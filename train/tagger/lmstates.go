package tagger

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/kit"
	"github.com/nerflow/nerflow/train/lm"
)

// TagLM (Peters et al. 2017): a tagger reads, beside its word
// representation, the states of a pretrained language model kept frozen,
// concatenated either with its input or with the output of its first
// BiLSTM layer (the placement the paper found best).
//
// Where the language model's states enter the tagger (Config.LMPlacement).
const (
	LMNone   = "none"   // no language model
	LMInput  = "input"  // concatenated with the word representation, before the first BiLSTM layer
	LMLayer1 = "layer1" // concatenated with the output of the first BiLSTM layer, the input of the second
)

// LMPlacements lists the placements, for the hyperparameter's choices.
func LMPlacements() []string { return []string{LMNone, LMInput, LMLayer1} }

// LanguageModel is a pretrained language model whose per-token states a
// tagger reads, frozen: package train/lm's forward and backward LSTMs,
// whose loader this package registers, or any model whose loader is
// registered with RegisterLanguageModel. A tagger given one
// owns it: Tagger.Close closes it, Tagger.Save saves it beside the tagger.
type LanguageModel interface {
	// Kind names the loader registered for the model's files.
	Kind() string
	// StateDim is the size of one token's state.
	StateDim() int
	// TokenStates returns, per sentence and token, StateDim values,
	// computed without gradient. The caller holds its OS thread.
	TokenStates(sentences [][]string) ([][][]float32, error)
	// Save writes the model's files into dir.
	Save(dir string) error
	// Close frees the model; closing it again does nothing.
	Close()
}

// LanguageModelLoader loads what a LanguageModel's Save wrote in dir.
type LanguageModelLoader func(dir string, device gotch.Device) (LanguageModel, error)

var lmLoaders = newNamed[LanguageModelLoader]("language model")

func init() {
	RegisterLanguageModel(lm.Kind, func(dir string, device gotch.Device) (LanguageModel, error) {
		return lm.Load(dir, device)
	})
}

var _ LanguageModel = (*lm.Model)(nil)

// RegisterLanguageModel makes the models of kind loadable with their
// tagger (Load); it panics on a duplicate.
func RegisterLanguageModel(kind string, load LanguageModelLoader) { lmLoaders.register(kind, load) }

// lmFiles maps the file that marks a saved language model's directory to
// its kind: the lm input of train.tagger takes a model of any of them.
var (
	lmFilesMu sync.Mutex
	lmFiles   = map[string]string{lm.ModelFile: lm.Kind}
)

// RegisterLanguageModelFile says that a directory holding file holds a
// saved model of kind (registered with RegisterLanguageModel), so that
// train.tagger's lm input accepts it; it panics on a duplicate.
func RegisterLanguageModelFile(file, kind string) {
	lmFilesMu.Lock()
	defer lmFilesMu.Unlock()
	if _, dup := lmFiles[file]; dup {
		panic("tagger: language model file " + file + " registered twice")
	}
	lmFiles[file] = kind
}

// loadLanguageModelDir loads the language model saved in dir, of the kind
// its files mark.
func loadLanguageModelDir(dir string, device gotch.Device) (LanguageModel, error) {
	lmFilesMu.Lock()
	var kind string
	for file, k := range lmFiles {
		if _, err := os.Stat(filepath.Join(dir, file)); err == nil {
			kind = k
			break
		}
	}
	lmFilesMu.Unlock()
	if kind == "" {
		return nil, fmt.Errorf("no %s or other known language model file (is the package that registers its kind linked in?)", lm.ModelFile)
	}
	load, err := lmLoaders.lookup(kind)
	if err != nil {
		return nil, err
	}
	return load(dir, device)
}

// lmDir is the directory of a tagger's checkpoint that holds its language
// model's files.
const lmDir = "lm"

// lmRef is how tagger.json points at the language model saved with it.
type lmRef struct {
	Kind string `json:"kind"`
	Dir  string `json:"dir"`
}

// loadLanguageModel loads the language model a checkpoint in dir refers to.
func loadLanguageModel(dir string, ref *lmRef, device gotch.Device) (LanguageModel, error) {
	if ref.Dir != lmDir {
		return nil, fmt.Errorf("language model directory %q, want %q", ref.Dir, lmDir)
	}
	load, err := lmLoaders.lookup(ref.Kind)
	if err != nil {
		return nil, fmt.Errorf("%w (is the package that registers it linked in?)", err)
	}
	m, err := load(filepath.Join(dir, ref.Dir), device)
	if err != nil {
		return nil, fmt.Errorf("language model: %w", err)
	}
	return m, nil
}

// TaggerOption configures a new Tagger.
type TaggerOption func(*Tagger)

// WithLanguageModel gives the tagger a frozen language model, read where
// Config.LMPlacement says; the tagger owns it from then on.
func WithLanguageModel(lm LanguageModel) TaggerOption { return func(m *Tagger) { m.lm = lm } }

// checkLanguageModel matches the language model given to the placement
// asked for, and records its state size in the config.
func (m *Tagger) checkLanguageModel() error {
	c := &m.Config
	switch {
	case c.usesLM() && m.lm == nil:
		return fmt.Errorf("lm_placement %s needs a language model", c.LMPlacement)
	case !c.usesLM() && m.lm != nil:
		return fmt.Errorf("a language model was given, but lm_placement is %s: say where its states go (%s or %s)", LMNone, LMInput, LMLayer1)
	case m.lm == nil:
		c.LMDim = 0
		return nil
	case c.LMDim != 0 && c.LMDim != m.lm.StateDim():
		return fmt.Errorf("the tagger was built for language-model states of size %d, the language model's are %d", c.LMDim, m.lm.StateDim())
	}
	c.LMDim = m.lm.StateDim()
	return nil
}

// usesLM says whether the tagger reads a language model.
func (c Config) usesLM() bool { return c.LMPlacement != "" && c.LMPlacement != LMNone }

// layerInputs returns the input size of each BiLSTM layer: the word
// representation (word vector, character features, casing) for the first,
// both directions' states for the others, each widened by the language
// model's states where they enter, and the first by the encoder's; none
// when the encoder replaces the BiLSTM.
func (c Config) layerInputs() []int {
	if c.replaced() {
		return nil
	}
	in := make([]int, c.Layers)
	for l := range in {
		in[l] = 2 * c.Hidden
		if l == 0 {
			in[l] = c.WordDim + c.CharFilters + c.CasingDim
			if c.usesEncoder() {
				in[l] += c.EncoderDim
			}
		}
		if (l == 0 && c.LMPlacement == LMInput) || (l == 1 && c.LMPlacement == LMLayer1) {
			in[l] += c.LMDim
		}
	}
	return in
}

// lmLayer is the BiLSTM layer whose input the language model's states
// join (-1: none).
func (c Config) lmLayer() int {
	switch c.LMPlacement {
	case LMInput:
		return 0
	case LMLayer1:
		return 1
	}
	return -1
}

// lmStates runs the frozen language model over the batch's sentences and
// returns their states in packed order, [b.n, LMDim]: a constant of the
// computation, no gradient flows into the language model.
func (m *Tagger) lmStates(g *kit.Graph, b *Batch) *ts.Tensor {
	states, err := m.lm.TokenStates(b.tokens)
	if err != nil {
		kit.Abort(fmt.Errorf("language model states: %w", err))
	}
	dim := m.Config.LMDim
	packed := make([]float32, b.n*dim)
	for i, sent := range states {
		if len(sent) != len(b.tokens[i]) {
			kit.Abort(fmt.Errorf("language model: %d states for a sentence of %d tokens", len(sent), len(b.tokens[i])))
		}
		for t, s := range sent {
			if len(s) != dim {
				kit.Abort(fmt.Errorf("language model: a state of size %d, want %d", len(s), dim))
			}
			copy(packed[b.pos(i, t)*dim:], s)
		}
	}
	return g.Floats(packed, int64(b.n), int64(dim))
}
