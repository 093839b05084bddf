package tagger

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/nn"
	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/embeddings"
	"github.com/nerflow/nerflow/kit"
	"github.com/nerflow/nerflow/train/overlay"
)

// Config is the architecture of a tagger:
//
//	word vector ⊕ character CNN ⊕ casing vector -> dropout -> BiLSTM
//	(Layers, Hidden per direction) -> dropout -> head
//
// with, for TagLM, a frozen language model's states concatenated with the
// input of the first or the second BiLSTM layer (LMPlacement, see
// lmstates.go), and, fine-tuned with it, a pretrained encoder's states
// concatenated with the word representation or in place of it and the
// BiLSTM (EncoderPlacement, see encoder.go).
type Config struct {
	Scheme      string  `json:"scheme"` // io, bio or bioes
	Head        string  `json:"head"`   // a registered head: TokenHead, CRFHead
	WordDim     int     `json:"word_dim"`
	CharDim     int     `json:"char_dim"`
	CharFilters int     `json:"char_filters"`
	CharKernel  int     `json:"char_kernel"` // odd
	MaxWordLen  int     `json:"max_word_len"`
	CasingDim   int     `json:"casing_dim"` // 0: no casing features
	Hidden      int     `json:"hidden"`
	Layers      int     `json:"layers"`
	Dropout     float64 `json:"dropout"`
	// WordDropout is the probability that a training token reads as the
	// unknown word, its characters and casing kept (0: none). Distant
	// labels come from a gazetteer, so a tagger can score well on them by
	// remembering the gazetteer's words; held-out text names entities the
	// gazetteer lacks, which only their spelling and context reveal. With
	// EncoderReplace there are no word vectors to drop, and it does nothing.
	WordDropout float64 `json:"word_dropout,omitempty"`
	// MaxSpan is the longest span, in tokens, that the span head scores
	// (and so can predict); other heads ignore it.
	MaxSpan int `json:"max_span,omitempty"`
	// LMPlacement is where a language model's states enter (LMNone,
	// LMInput, LMLayer1; empty: none); LMDim is their size, set from the
	// language model.
	LMPlacement string `json:"lm_placement,omitempty"`
	LMDim       int    `json:"lm_dim,omitempty"`
	// EncoderPlacement is where a fine-tuned encoder's states enter
	// (EncoderNone, EncoderUnder, EncoderReplace; empty: none);
	// EncoderDim is their size, set from the encoder.
	EncoderPlacement string `json:"encoder_placement,omitempty"`
	EncoderDim       int    `json:"encoder_dim,omitempty"`
}

// DefaultConfig is a BiLSTM-CNN tagger in the spirit of Ma and Hovy (2016)
// with RoSTER's token head and the IO scheme.
func DefaultConfig() Config {
	return Config{
		Scheme: "io", Head: TokenHead,
		WordDim: 100, CharDim: 30, CharFilters: 50, CharKernel: 3, MaxWordLen: 25, CasingDim: 8,
		Hidden: 200, Layers: 1, Dropout: 0.5, MaxSpan: 10, LMPlacement: LMNone, EncoderPlacement: EncoderNone,
	}
}

func (c Config) validate() error {
	var errs []error
	if _, err := lookupHead(c.Head); err != nil {
		errs = append(errs, err)
	}
	for name, v := range map[string]int{"word_dim": c.WordDim, "char_dim": c.CharDim, "char_filters": c.CharFilters, "max_word_len": c.MaxWordLen, "hidden": c.Hidden, "layers": c.Layers} {
		if v < 1 {
			errs = append(errs, fmt.Errorf("%s is %d, want at least 1", name, v))
		}
	}
	if c.CharKernel < 1 || c.CharKernel%2 == 0 {
		errs = append(errs, fmt.Errorf("char_kernel is %d, want an odd number", c.CharKernel))
	}
	if c.Head == SpanHead && c.MaxSpan < 1 {
		errs = append(errs, fmt.Errorf("max_span is %d, the span head needs at least 1", c.MaxSpan))
	}
	if c.CasingDim < 0 {
		errs = append(errs, fmt.Errorf("casing_dim is %d", c.CasingDim))
	}
	if c.Dropout < 0 || c.Dropout >= 1 {
		errs = append(errs, fmt.Errorf("dropout is %v, want [0, 1)", c.Dropout))
	}
	if c.WordDropout < 0 || c.WordDropout >= 1 {
		errs = append(errs, fmt.Errorf("word_dropout is %v, want [0, 1)", c.WordDropout))
	}
	switch c.LMPlacement {
	case "", LMNone, LMInput:
	case LMLayer1:
		if c.Layers < 2 {
			errs = append(errs, fmt.Errorf("lm_placement %s feeds the language model's states to the second BiLSTM layer: layers is %d, want at least 2", LMLayer1, c.Layers))
		}
	default:
		errs = append(errs, fmt.Errorf("lm_placement %q: want one of %s", c.LMPlacement, strings.Join(LMPlacements(), ", ")))
	}
	switch c.EncoderPlacement {
	case "", EncoderNone, EncoderUnder:
	case EncoderReplace:
		if c.usesLM() {
			errs = append(errs, fmt.Errorf("encoder_placement %s leaves no BiLSTM for lm_placement %s to feed: use encoder_placement %s", EncoderReplace, c.LMPlacement, EncoderUnder))
		}
	default:
		errs = append(errs, fmt.Errorf("encoder_placement %q: want one of %s", c.EncoderPlacement, strings.Join(EncoderPlacements(), ", ")))
	}
	return errors.Join(errs...)
}

// Tagger is a neural sequence tagger. Its weights live in a gotch VarStore
// on one device; every method that computes must run on a goroutine locked
// to its OS thread (libtorch keeps grad mode per thread): the trainer and
// Predict run on threads of their own (onComputeThread).
type Tagger struct {
	Config Config
	Vocab  *Vocab
	Labels *Labels

	device gotch.Device
	vs     *nn.VarStore

	wordEmb, charEmb, caseEmb *ts.Tensor
	// frozenEmb holds the vectors of Vocab.Frozen(), on the device but
	// outside the VarStore: no gradient, no optimizer state, not in
	// WeightsFile. Nil without a frozen table.
	frozenEmb    *ts.Tensor
	convW, convB *ts.Tensor
	lstm         [][]*ts.Tensor // per layer: the 8 weights of a bidirectional LSTM, as libtorch orders them

	head HeadWeights // of the head Config.Head
	// lm is the frozen language model of TagLM (nil: none).
	lm LanguageModel
	// enc is the encoder fine-tuned under the tagger (nil: none);
	// frozenEnc keeps its weights as they are (tuneEncoder).
	enc       Encoder
	frozenEnc bool
	// overlay combines another source's entities with the tagger's in
	// Predict (nil: none; see package overlay).
	overlay *overlay.Attached
}

// NewTagger builds a tagger with freshly initialized weights, drawn from
// seed: the same seed gives the same weights on every machine. Word vectors
// with a pretrained counterpart in table start from it. A language model
// given with WithLanguageModel is owned by the tagger, even when NewTagger
// fails.
func NewTagger(cfg Config, vocab *Vocab, labels *Labels, table *embeddings.Table, seed uint64, device gotch.Device, opts ...TaggerOption) (*Tagger, error) {
	if table != nil {
		cfg.WordDim = table.Dim
	}
	m := &Tagger{Config: cfg, Vocab: vocab, Labels: labels, device: device}
	for _, o := range opts {
		o(m)
	}
	fail := func(err error) (*Tagger, error) {
		m.Close()
		return nil, err
	}
	if err := m.Config.validate(); err != nil {
		return fail(fmt.Errorf("tagger config: %w", err))
	}
	if err := m.checkLanguageModel(); err != nil {
		return fail(fmt.Errorf("tagger config: %w", err))
	}
	if err := m.checkEncoder(); err != nil {
		return fail(fmt.Errorf("tagger config: %w", err))
	}
	cfg = m.Config
	if t := vocab.Frozen(); t != nil && t.Dim != cfg.WordDim {
		return fail(fmt.Errorf("frozen vectors have dimension %d, the tagger's words %d", t.Dim, cfg.WordDim))
	}
	if table != nil && vocab.Pretrained > table.Len() {
		return fail(fmt.Errorf("vocabulary has %d pretrained words, the table %d", vocab.Pretrained, table.Len()))
	}
	m.vs = nn.NewVarStore(device)
	init := &kit.Initializer{Rng: rand.New(rand.NewPCG(seed, 0x5eed)), Root: m.vs.Root(), Device: device}
	err := kit.Guard(func() { m.build(init, table) })
	if err == nil {
		err = kit.FlattenLSTM(m.device, m.lstm, m.Config.layerInputs(), m.Config.Hidden)
	}
	if err == nil {
		err = kit.Guard(m.uploadFrozen)
	}
	if err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// Close frees the tagger's weights.
func (m *Tagger) Close() {
	if m.vs != nil {
		m.vs.Destroy()
		m.vs = nil
	}
	if m.frozenEmb != nil {
		_ = m.frozenEmb.Drop()
		m.frozenEmb = nil
	}
	if m.lm != nil {
		m.lm.Close()
		m.lm = nil
	}
	if m.enc != nil {
		m.enc.Close()
		m.enc = nil
	}
}

// uploadFrozen puts the frozen table's vectors on the device.
func (m *Tagger) uploadFrozen() {
	t := m.Vocab.Frozen()
	if t == nil || m.Config.replaced() {
		return
	}
	x, err := ts.OfDataSize(kit.BytesOf(t.Vectors), []int64{int64(t.Len()), int64(t.Dim)}, gotch.Float)
	if err != nil {
		kit.Abort(err)
	}
	if m.device != gotch.CPU {
		if x, err = x.To(m.device, true); err != nil { // true: drops the host copy
			kit.Abort(err)
		}
	}
	m.frozenEmb = x
}

// Device is where the tagger computes.
func (m *Tagger) Device() gotch.Device { return m.device }

func (m *Tagger) build(p *kit.Initializer, table *embeddings.Table) {
	c := m.Config
	head, _ := lookupHead(c.Head) // checked by validate
	if c.replaced() {
		// The encoder's states go straight to the head: no word
		// representation, no BiLSTM.
		m.head = head.NewWeights(p, c.headInput(), m.Labels, c)
		return
	}
	words := p.UniformData(len(m.Vocab.Words)*c.WordDim, math.Sqrt(3/float64(c.WordDim)))
	if table != nil {
		// Vocabulary words 1..Pretrained start from their pretrained vectors.
		for i, w := range m.Vocab.Words[1 : 1+m.Vocab.Pretrained] {
			if j, ok := table.Lookup(w); ok {
				copy(words[(i+1)*c.WordDim:(i+2)*c.WordDim], table.Vector(j))
			}
		}
	}
	m.wordEmb = p.Param("word_emb", words, len(m.Vocab.Words), c.WordDim)
	m.charEmb = p.CharVectors("char_emb", len(m.Vocab.Chars), c.CharDim)
	if c.CasingDim > 0 {
		m.caseEmb = p.Uniform("casing_emb", math.Sqrt(3/float64(c.CasingDim)), numCasings, c.CasingDim)
	}
	fanIn := float64(c.CharDim * c.CharKernel)
	m.convW = p.Uniform("char_conv_w", 1/math.Sqrt(fanIn), c.CharFilters, c.CharDim, c.CharKernel)
	m.convB = p.Uniform("char_conv_b", 1/math.Sqrt(fanIn), c.CharFilters)

	bound := 1 / math.Sqrt(float64(c.Hidden))
	gates := 4 * c.Hidden
	for l, in := range c.layerInputs() {
		var ws []*ts.Tensor
		for _, dir := range []string{"", "_reverse"} {
			ws = append(ws,
				p.Uniform(fmt.Sprintf("lstm_w_ih_l%d%s", l, dir), bound, gates, in),
				p.Uniform(fmt.Sprintf("lstm_w_hh_l%d%s", l, dir), bound, gates, c.Hidden),
				p.Uniform(fmt.Sprintf("lstm_b_ih_l%d%s", l, dir), bound, gates),
				p.Uniform(fmt.Sprintf("lstm_b_hh_l%d%s", l, dir), bound, gates))
		}
		m.lstm = append(m.lstm, ws)
	}

	m.head = head.NewWeights(p, c.headInput(), m.Labels, c)
}

// forward runs the encoder on a batch and returns what the head reads,
// [tokens, Config.headInput()] in packed order: the BiLSTM's output, or the
// encoder's states in its place. With train, dropout masks are drawn from
// rng.
func (m *Tagger) forward(g *kit.Graph, b *Batch, train bool, rng *rand.Rand) *ts.Tensor {
	c := m.Config
	n := int64(b.n)
	if c.replaced() {
		x := m.encoderStates(g, b, train, rng)
		if train {
			x = g.Dropout(x, c.Dropout, rng)
		}
		return x
	}
	ids := b.words
	if train {
		ids = dropWords(ids, c.WordDropout, rng)
	}
	words := m.embedWords(g, ids)

	charFeat := g.CharCNN(m.charEmb, m.convW, m.convB, b.chars)

	parts := []*ts.Tensor{words, charFeat}
	if m.caseEmb != nil {
		parts = append(parts, g.T(ts.Embedding(m.caseEmb, g.Ints(b.casing, n), -1, false, false)))
	}
	var lmStates *ts.Tensor
	if m.lm != nil {
		lmStates = m.lmStates(g, b)
	}
	if c.lmLayer() == 0 {
		parts = append(parts, lmStates)
	}
	if c.usesEncoder() {
		parts = append(parts, m.encoderStates(g, b, train, rng))
	}
	x := g.T(ts.Cat(parts, 1))
	if train {
		x = g.Dropout(x, c.Dropout, rng)
	}

	batchSizes := g.CPUInts(b.batchSizes)
	bsz := b.batchSizes[0]
	for l, ws := range m.lstm {
		if l == 1 && c.lmLayer() == 1 {
			x = g.T(ts.Cat([]*ts.Tensor{x, lmStates}, 1))
		}
		if l > 0 && train {
			x = g.Dropout(x, c.Dropout, rng)
		}
		if g.LSTMHelper != nil && !train {
			x = m.lstmDirectionsApart(g, x, batchSizes, b, ws)
			continue
		}
		h0 := g.T(ts.Zeros([]int64{2, bsz, int64(c.Hidden)}, gotch.Float, m.device))
		out, _, _ := g.T3(ts.LstmData(x, batchSizes, []*ts.Tensor{h0, h0}, ws, true, 1, 0, train, true))
		x = out
	}
	if train {
		x = g.Dropout(x, c.Dropout, rng)
	}
	return x
}

// dropWords returns ids with each word replaced by the unknown word with
// probability p, drawn from rng; with p 0 it returns ids itself and draws
// nothing, so that the dropout masks after it, and the run, are those of a
// tagger without word dropout.
func dropWords(ids []int64, p float64, rng *rand.Rand) []int64 {
	if p <= 0 {
		return ids
	}
	out := slices.Clone(ids)
	for i := range out {
		if rng.Float64() < p {
			out[i] = unkWord
		}
	}
	return out
}

// embedWords looks up the vectors of word ids: trained rows from the
// tagger's weights, frozen ones from the pretrained table. A batch with
// frozen words looks up both tables, each with the other's words pointed at
// row 0, and picks per token (where: exact values, and the trained row 0
// gets no gradient from frozen words).
func (m *Tagger) embedWords(g *kit.Graph, ids []int64) *ts.Tensor {
	n := int64(len(ids))
	var trained, frozen []int64
	var mask []byte
	for i, id := range ids {
		if !m.Vocab.IsFrozen(int(id)) {
			continue
		}
		if frozen == nil {
			trained, frozen, mask = slices.Clone(ids), make([]int64, n), make([]byte, n)
		}
		trained[i], frozen[i], mask[i] = unkWord, id-int64(len(m.Vocab.Words)), 1
	}
	if frozen == nil {
		return g.T(ts.Embedding(m.wordEmb, g.Ints(ids, n), -1, false, false))
	}
	tw := g.T(ts.Embedding(m.wordEmb, g.Ints(trained, n), -1, false, false))
	fw := g.T(ts.Embedding(m.frozenEmb, g.Ints(frozen, n), -1, false, false))
	isFrozen := g.Upload(mask, []int64{n, 1}, gotch.Bool)
	return g.T(fw.WhereSelf(isFrozen, tw, false))
}

// numTypes returns the number of entity tags (classes other than O).
func (m *Tagger) numTypes() int { return m.Labels.NumTags() - 1 }

// schemeOf parses a config's scheme name.
func schemeOf(name string) (corpus.Scheme, error) {
	s, err := corpus.ParseScheme(name)
	if err != nil {
		return 0, err
	}
	return s, nil
}
