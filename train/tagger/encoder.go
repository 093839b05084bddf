package tagger

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/kit"
)

// Fine-tuning a pretrained encoder (package train/encoder, stage
// encoder.pretrain) under the tagger: the encoder's top states are computed
// inside the tagger's graph, so that the tagger's loss trains the encoder's
// weights with its own, at a rate of its own (TrainConfig's
// EncoderLearningRate and EncoderWarmup, a parameter group of kit.Fit). A
// language model (lmstates.go) is read frozen, through TokenStates; an
// encoder here is part of the tagger, saved in its directory encoder/ with
// the fine-tuned weights.
//
// Where the encoder's states go (Config.EncoderPlacement).
const (
	EncoderNone = "none"
	// EncoderUnder concatenates the encoder's states with the tagger's own
	// word representation (word vector, character CNN, casing) as the
	// BiLSTM's input: encoder -> BiLSTM -> head.
	EncoderUnder = "under"
	// EncoderReplace feeds the encoder's states straight to the head, in
	// place of the word representation and the BiLSTM (BERT's fine-tuning):
	// encoder -> head.
	EncoderReplace = "replace"
)

// EncoderPlacements lists the placements, for the hyperparameter's choices.
func EncoderPlacements() []string { return []string{EncoderNone, EncoderUnder, EncoderReplace} }

// Encoder is a pretrained encoder a tagger fine-tunes. Package
// train/encoder's model is one; it registers its loader with
// RegisterEncoder. A tagger given one owns it: Tagger.Close closes it,
// Tagger.Save saves it (fine-tuned) in the tagger's directory.
type Encoder interface {
	// Kind names the loader registered for the encoder's files.
	Kind() string
	// StateDim is the size of one token's state.
	StateDim() int
	// States computes, in g, the top states of every token of the
	// sentences, [tokens, StateDim], sentence after sentence: the gradient
	// of what is computed from them reaches Weights (unless under
	// kit.NoGrad). With train, dropout masks are drawn from rng. Inside
	// kit.Guard, on the computing thread.
	States(g *kit.Graph, sentences [][]string, train bool, rng *rand.Rand) *ts.Tensor
	// Weights are the encoder's parameters, by name.
	Weights() []ts.NamedTensor
	// Save writes the encoder's files (its current weights) into dir.
	Save(dir string) error
	// Close frees the encoder; closing it again does nothing.
	Close()
}

// EncoderLoader loads what an Encoder's Save wrote in dir.
type EncoderLoader func(dir string, device gotch.Device) (Encoder, error)

var (
	encodersMu sync.Mutex
	encoders   = newNamed[EncoderLoader]("encoder")
	// encoderFiles maps the file that marks a saved encoder's directory to
	// its kind.
	encoderFiles = map[string]string{}
)

// RegisterEncoder makes encoders of kind loadable: from a directory holding
// file (the encoder input of train.tagger), and with their tagger (Load).
// It panics on a duplicate.
func RegisterEncoder(kind, file string, load EncoderLoader) {
	encodersMu.Lock()
	defer encodersMu.Unlock()
	if _, dup := encoderFiles[file]; dup {
		panic("tagger: encoder file " + file + " registered twice")
	}
	encoders.register(kind, load)
	encoderFiles[file] = kind
}

// LoadEncoderDir loads the encoder saved in dir, of the kind its files mark.
func LoadEncoderDir(dir string, device gotch.Device) (Encoder, error) {
	encodersMu.Lock()
	var kind string
	var files []string
	for file, k := range encoderFiles {
		files = append(files, file)
		if _, err := os.Stat(filepath.Join(dir, file)); err == nil {
			kind = k
		}
	}
	encodersMu.Unlock()
	if kind == "" {
		return nil, fmt.Errorf("no encoder in %s: none of the files %s (is the package that registers the encoder linked in?)", dir, strings.Join(files, ", "))
	}
	return LoadEncoder(kind, dir, device)
}

// LoadEncoder loads the encoder of kind saved in dir (a model saved with
// its encoder reads it back so).
func LoadEncoder(kind, dir string, device gotch.Device) (Encoder, error) {
	encodersMu.Lock()
	load, err := encoders.lookup(kind)
	encodersMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("%w (is the package that registers it linked in?)", err)
	}
	return load(dir, device)
}

// encoderDir is the directory of a saved tagger that holds its encoder.
const encoderDir = "encoder"

// EncoderWeightPrefix prefixes the encoder's weights among the tagger's
// (Weights: checkpoints, the best evaluation's weights, the optimizer's
// groups).
const EncoderWeightPrefix = "encoder."

// WithEncoder gives the tagger an encoder, read where
// Config.EncoderPlacement says; the tagger owns it from then on.
func WithEncoder(e Encoder) TaggerOption { return func(m *Tagger) { m.enc = e } }

// checkEncoder matches the encoder given to the placement asked for, and
// records its state size in the config.
func (m *Tagger) checkEncoder() error {
	c := &m.Config
	switch {
	case c.usesEncoder() && m.enc == nil:
		return fmt.Errorf("encoder_placement %s needs an encoder", c.EncoderPlacement)
	case !c.usesEncoder() && m.enc != nil:
		return fmt.Errorf("an encoder was given, but encoder_placement is %s: say where its states go (%s or %s)", EncoderNone, EncoderUnder, EncoderReplace)
	case m.enc == nil:
		c.EncoderDim = 0
		return nil
	case c.EncoderDim != 0 && c.EncoderDim != m.enc.StateDim():
		return fmt.Errorf("the tagger was built for encoder states of size %d, the encoder's are %d", c.EncoderDim, m.enc.StateDim())
	}
	c.EncoderDim = m.enc.StateDim()
	return nil
}

// usesEncoder says whether the tagger reads an encoder.
func (c Config) usesEncoder() bool {
	return c.EncoderPlacement != "" && c.EncoderPlacement != EncoderNone
}

// replaced says whether the encoder replaces the word representation and
// the BiLSTM, which the tagger then does not have.
func (c Config) replaced() bool { return c.EncoderPlacement == EncoderReplace }

// headInput is the size of what the head reads: the BiLSTM's two
// directions, or the encoder's states in its place.
func (c Config) headInput() int {
	if c.replaced() {
		return c.EncoderDim
	}
	return 2 * c.Hidden
}

// tuneEncoder says whether training updates the encoder's weights (the
// default): false keeps them frozen, the encoder's states then computed
// without gradient or dropout. The Trainer sets it from
// TrainConfig.EncoderLearningRate.
func (m *Tagger) tuneEncoder(tune bool) { m.frozenEnc = !tune }

// encoderStates runs the encoder over the batch's sentences and returns
// their states in packed order, [b.n, EncoderDim].
func (m *Tagger) encoderStates(g *kit.Graph, b *Batch, train bool, rng *rand.Rand) *ts.Tensor {
	return PackedEncoderStates(g, m.enc, b.tokens, b.pos, b.n, train, m.frozenEnc, rng)
}

// PackedEncoderStates runs enc over the sentences of a batch in the packed
// layout of libtorch's RNNs (n tokens; token t of the i-th sentence at
// pos(i, t)) and returns their states in that order, [n, StateDim]. With
// frozen, they are computed without gradient or dropout; else, with train,
// with the encoder's dropout drawn from rng. Inside kit.Guard.
func PackedEncoderStates(g *kit.Graph, enc Encoder, sentences [][]string, pos func(i, t int) int, n int, train, frozen bool, rng *rand.Rand) *ts.Tensor {
	// The encoder lays out the tokens sentence after sentence; the packed
	// order takes them step by step.
	order := make([]int64, n)
	at := 0
	for i, s := range sentences {
		for t := range s {
			p := pos(i, t)
			if p < 0 || p >= n {
				kit.Abort(fmt.Errorf("encoder: token %d of sentence %d at %d, outside the batch's %d tokens", t, i, p, n))
			}
			order[p] = int64(at)
			at++
		}
	}
	if at != n {
		kit.Abort(fmt.Errorf("encoder: %d tokens in the batch's sentences, %d in the batch", at, n))
	}
	var x *ts.Tensor
	compute := func() {
		x = enc.States(g, sentences, train && !frozen, rng)
		x = g.T(x.IndexSelect(0, g.Ints(order, int64(n)), false))
	}
	if frozen {
		kit.NoGrad(compute)
	} else {
		compute()
	}
	return x
}

// EncoderWeights are enc's weights under the names a model that carries it
// gives them (EncoderWeightPrefix).
func EncoderWeights(enc Encoder) []ts.NamedTensor {
	w := enc.Weights()
	out := make([]ts.NamedTensor, len(w))
	for i, nt := range w {
		out[i] = ts.NamedTensor{Name: EncoderWeightPrefix + nt.Name, Tensor: nt.Tensor}
	}
	return out
}

// trainedWeights are the weights a training updates: a frozen encoder's
// are left out.
func (m *Tagger) trainedWeights() []ts.NamedTensor {
	if m.frozenEnc {
		return m.ownWeights()
	}
	return m.namedWeights()
}

// paramGroups puts a fine-tuned encoder's weights on a schedule of their
// own (cfg's encoder learning rate and warm-up); nil without an encoder,
// or with it frozen.
func (m *Tagger) paramGroups(cfg TrainConfig) []kit.ParamGroup {
	if m.enc == nil || m.frozenEnc {
		return nil
	}
	names, _ := kit.SplitNamed(m.encoderWeights())
	return []kit.ParamGroup{{Name: "encoder", Weights: names, LearningRate: cfg.EncoderLearningRate, Warmup: cfg.EncoderWarmup}}
}

// encoderWeights are the encoder's weights under the tagger's names (nil
// without an encoder).
func (m *Tagger) encoderWeights() []ts.NamedTensor {
	if m.enc == nil {
		return nil
	}
	return EncoderWeights(m.enc)
}
