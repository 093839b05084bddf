// Package vsl is the variational sequential labeler of Chen et al. (2018),
// "Variational Sequential Labelers for Semi-Supervised Learning": a tagger
// that also learns from unlabeled sentences by reconstructing their words
// through per-token Gaussian latent variables.
//
// The inference network reads fixed pretrained word vectors and the
// tagger's character CNN (kit.CharCNN) with a BiGRU. Per token it
// parameterizes a Gaussian over a label-bearing latent y, and one over a
// second latent z:
//
//   - flat (VSL-GG-Flat): q(y|x) and q(z|x) both from the BiGRU state; the
//     word is reconstructed from [y; z]; both latents have the prior N(0, I);
//   - hierarchical (VSL-GG-Hier): q(y|x) from the BiGRU state, q(z|y,x)
//     from the state and a sample of y; the word is reconstructed from z
//     alone, so what y carries reaches the word through z; y has the prior
//     N(0, I), z the learned conditional prior p(z|y).
//
// A linear classifier on y predicts the tag from the mean of q(y|x) (by
// default; Config.Classify), or in training from a sample of y as in the
// paper. The loss of a labeled sentence is the
// negative ELBO (reconstruction plus KL terms, the KL weight warmed up
// linearly from 0: KL annealing) plus the weighted cross entropy of its
// tags; an unlabeled sentence contributes the negative ELBO alone. Samples
// use the reparameterization trick (mean + standard deviation times noise
// drawn from the run's seed), so the ELBO's gradient reaches the encoder.
//
// The reconstruction is a softmax over a limited vocabulary: the
// ReconWords most frequent lower-cased words of the training text (labeled
// and unlabeled), every other word being one "unknown" class.
//
// Training runs on kit.Fit (train.go: the epochs, schedule, clipping, best
// epoch and patience are the loop's; the losses, KL annealing and the
// stream of unlabeled batches this package's). The stage train.vsl
// (stage.go) trains a model; train.predict tags a corpus with it.
package vsl

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/nn"
	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/embeddings"
	"github.com/nerflow/nerflow/kit"
	"github.com/nerflow/nerflow/train/tagger"
)

// Variants of the latent structure.
const (
	Flat = "flat"
	Hier = "hier"
)

// Config is the architecture of a VSL.
type Config struct {
	Variant     string  `json:"variant"` // Flat or Hier
	Scheme      string  `json:"scheme"`  // io, bio or bioes
	CharDim     int     `json:"char_dim"`
	CharFilters int     `json:"char_filters"`
	CharKernel  int     `json:"char_kernel"` // odd
	MaxWordLen  int     `json:"max_word_len"`
	Hidden      int     `json:"hidden"` // GRU units per direction
	YDim        int     `json:"y_dim"`
	ZDim        int     `json:"z_dim"`
	ReconWords  int     `json:"recon_words"` // reconstruction vocabulary, the unknown word aside
	Dropout     float64 `json:"dropout"`
	// Classify is what the classifier reads in training: ClassifyMean
	// (the mean of q(y|x), as at prediction) or ClassifySample (a sample
	// of y, whose noise the KL term keeps near unit variance).
	Classify string `json:"classify"`
	// EncoderDim is the size of a fine-tuned encoder's states, which join
	// the BiGRU's input (0: none); set from the encoder (WithEncoder).
	EncoderDim int `json:"encoder_dim,omitempty"`
}

// What the classifier reads in training.
const (
	ClassifyMean   = "mean"
	ClassifySample = "sample"
)

// DefaultConfig is the hierarchical model with latents of 64 dimensions,
// close to the paper's sizes at a CPU's budget.
func DefaultConfig() Config {
	return Config{Variant: Hier, Scheme: "bio", CharDim: 30, CharFilters: 50, CharKernel: 3, MaxWordLen: 25,
		Hidden: 128, YDim: 64, ZDim: 64, ReconWords: 10000, Dropout: 0.3, Classify: ClassifyMean}
}

func (c Config) validate() error {
	var errs []error
	if c.Variant != Flat && c.Variant != Hier {
		errs = append(errs, fmt.Errorf("variant %q, want %s or %s", c.Variant, Flat, Hier))
	}
	for name, v := range map[string]int{"char_dim": c.CharDim, "char_filters": c.CharFilters, "max_word_len": c.MaxWordLen,
		"hidden": c.Hidden, "y_dim": c.YDim, "z_dim": c.ZDim, "recon_words": c.ReconWords} {
		if v < 1 {
			errs = append(errs, fmt.Errorf("%s is %d, want at least 1", name, v))
		}
	}
	if c.Classify != ClassifyMean && c.Classify != ClassifySample {
		errs = append(errs, fmt.Errorf("classify %q, want %s or %s", c.Classify, ClassifyMean, ClassifySample))
	}
	if c.CharKernel < 1 || c.CharKernel%2 == 0 {
		errs = append(errs, fmt.Errorf("char_kernel is %d, want an odd number", c.CharKernel))
	}
	if c.Dropout < 0 || c.Dropout >= 1 {
		errs = append(errs, fmt.Errorf("dropout is %v, want [0, 1)", c.Dropout))
	}
	return errors.Join(errs...)
}

// Model is a variational sequential labeler. Its methods that compute run
// on a goroutine locked to its OS thread; the exported ones lock it
// themselves.
type Model struct {
	Config Config
	Labels *tagger.Labels
	// Vocab gives the word ids (its lookup policy) and character ids; its
	// frozen table holds the fixed word vectors.
	Vocab *tagger.Vocab
	// Recon is the reconstruction vocabulary: "<unk>", then the most
	// frequent word keys (embeddings.Key) of the training text.
	Recon []string
	recon map[string]int

	device gotch.Device
	vs     *nn.VarStore
	// words holds the fixed vectors: row 0 the unknown word (zeros), row
	// 1+i the table's word i. Outside the VarStore: no gradient.
	words *ts.Tensor

	charEmb, convW, convB *ts.Tensor
	gru                   []*ts.Tensor // the 8 weights of a bidirectional GRU layer, in libtorch's order
	qY, qZ, pZ, cls, dec  linear       // pZ: hier only

	// enc is a pretrained encoder fine-tuned with the model, its states
	// beside the word vectors and character features (nil: none);
	// frozenEnc keeps its weights as they are (TrainConfig's
	// EncoderLearningRate 0).
	enc       tagger.Encoder
	frozenEnc bool
}

// ModelOption configures a new Model.
type ModelOption func(*Model)

// WithEncoder gives the model a pretrained encoder to fine-tune, whose
// states join the BiGRU's input (docs/encoder.md); the model owns it from
// then on, even when New fails.
func WithEncoder(e tagger.Encoder) ModelOption { return func(m *Model) { m.enc = e } }

// linear is y = x W^T + b.
type linear struct{ w, b *ts.Tensor }

func (l linear) apply(g *kit.Graph, x *ts.Tensor) *ts.Tensor {
	return g.T(ts.Linear(x, l.w, l.b))
}

// New builds a model with weights drawn from seed, over the fixed word
// vectors of vocab's frozen table and a reconstruction vocabulary of
// recon's words (the unknown word is added first).
func New(cfg Config, labels *tagger.Labels, vocab *tagger.Vocab, recon []string, seed uint64, device gotch.Device, opts ...ModelOption) (*Model, error) {
	m := &Model{Config: cfg, Labels: labels, Vocab: vocab, Recon: append([]string{"<unk>"}, recon...), device: device, vs: nn.NewVarStore(device)}
	for _, o := range opts {
		o(m)
	}
	fail := func(err error) (*Model, error) {
		m.Close()
		return nil, err
	}
	if err := cfg.validate(); err != nil {
		return fail(fmt.Errorf("vsl config: %w", err))
	}
	switch {
	case m.enc == nil && cfg.EncoderDim != 0:
		return fail(fmt.Errorf("vsl config: built for encoder states of size %d, and no encoder was given", cfg.EncoderDim))
	case m.enc != nil && cfg.EncoderDim != 0 && cfg.EncoderDim != m.enc.StateDim():
		return fail(fmt.Errorf("vsl config: built for encoder states of size %d, the encoder's are %d", cfg.EncoderDim, m.enc.StateDim()))
	case m.enc != nil:
		m.Config.EncoderDim = m.enc.StateDim()
	}
	table := vocab.Frozen()
	if table == nil {
		return fail(errors.New("vsl: the vocabulary has no word vectors (connect embeddings)"))
	}
	m.index()
	rng := rand.New(rand.NewPCG(seed, 0x75e1))
	err := m.uploadWords(table)
	if err == nil {
		err = kit.Guard(func() { m.build(rng, table.Dim) })
	}
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("vsl: %w", err)
	}
	return m, nil
}

func (m *Model) index() {
	m.recon = make(map[string]int, len(m.Recon))
	for i, w := range m.Recon[1:] {
		m.recon[w] = i + 1
	}
}

// Close frees the weights.
func (m *Model) Close() {
	if m.vs != nil {
		m.vs.Destroy()
		m.vs = nil
	}
	if m.words != nil {
		_ = m.words.Drop()
		m.words = nil
	}
	if m.enc != nil {
		m.enc.Close()
		m.enc = nil
	}
}

// Device is where the model computes.
func (m *Model) Device() gotch.Device { return m.device }

// uploadWords puts the fixed word vectors on the device: row 0 the unknown
// word, row 1+i the table's word i.
func (m *Model) uploadWords(t *embeddings.Table) error {
	data := make([]float32, (t.Len()+1)*t.Dim)
	copy(data[t.Dim:], t.Vectors)
	x, err := ts.OfSlice(data)
	if err == nil {
		x, err = x.View([]int64{int64(t.Len() + 1), int64(t.Dim)}, true)
	}
	if err == nil && m.device != gotch.CPU {
		x, err = x.To(m.device, true)
	}
	m.words = x
	return err
}

func (m *Model) build(rng *rand.Rand, wordDim int) {
	c := m.Config
	init := &kit.Initializer{Rng: rng, Root: m.vs.Root(), Device: m.device}
	u := init.Uniform
	lin := func(name string, in, out int) linear {
		b := 1 / math.Sqrt(float64(in))
		return linear{u(name+"_w", b, out, in), u(name+"_b", b, out)}
	}
	m.charEmb = init.CharVectors("char_emb", len(m.Vocab.Chars), c.CharDim)
	fanIn := float64(c.CharDim * c.CharKernel)
	m.convW = u("char_conv_w", 1/math.Sqrt(fanIn), c.CharFilters, c.CharDim, c.CharKernel)
	m.convB = u("char_conv_b", 1/math.Sqrt(fanIn), c.CharFilters)

	in := wordDim + c.CharFilters + c.EncoderDim
	bound := 1 / math.Sqrt(float64(c.Hidden))
	for _, dir := range []string{"", "_reverse"} {
		m.gru = append(m.gru,
			u("gru_w_ih"+dir, bound, 3*c.Hidden, in),
			u("gru_w_hh"+dir, bound, 3*c.Hidden, c.Hidden),
			u("gru_b_ih"+dir, bound, 3*c.Hidden),
			u("gru_b_hh"+dir, bound, 3*c.Hidden))
	}
	h := 2 * c.Hidden
	m.qY = lin("q_y", h, 2*c.YDim)
	m.cls = lin("classifier", c.YDim, m.Labels.NumTags())
	switch c.Variant {
	case Flat:
		m.qZ = lin("q_z", h, 2*c.ZDim)
		m.dec = lin("decoder", c.YDim+c.ZDim, len(m.Recon))
	case Hier:
		m.qZ = lin("q_z", h+c.YDim, 2*c.ZDim)
		m.pZ = lin("p_z", c.YDim, 2*c.ZDim)
		m.dec = lin("decoder", c.ZDim, len(m.Recon))
	}
}

// parameters returns the trained weights by name, sorted.
func (m *Model) parameters() ([]string, []*ts.Tensor) {
	return kit.SplitNamed(m.named())
}

// named are the model's own weights, without its encoder's (WeightsFile).
func (m *Model) named() []ts.NamedTensor { return kit.NamedParams(m.vs) }

// trained are the weights training updates: the model's own and a
// fine-tuned encoder's, prefixed tagger.EncoderWeightPrefix.
func (m *Model) trained() []ts.NamedTensor {
	if m.enc == nil || m.frozenEnc {
		return m.named()
	}
	return append(m.named(), tagger.EncoderWeights(m.enc)...)
}

// TagSet is the scheme and tags of the model's predictions
// (tagger.Predictor).
func (m *Model) TagSet() *tagger.Labels { return m.Labels }
