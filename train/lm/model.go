// Package lm holds the forward and backward LSTM language models that
// nerflow pretrains on unlabeled text: RoSTER's contextual augmentation
// asks them for masked-word distributions (package augment), and TagLM
// feeds their top-layer states to a tagger (States).
//
// Both directions share the word vectors and the output softmax, as in
// ELMo; each has its own LSTM. The forward model reads <s> w1 ... wn and
// predicts w1 ... wn </s>; the backward model reads <s> wn ... w1 and
// predicts wn ... w1 <s> (one boundary id serves as both). Sentences are
// padded at the end, so padding never reaches a real position's state.
//
// Train (train.go) fits both on kit.Fit, with checkpoints that hold the
// models whole; a tagger loads them with itself (package train/tagger
// registers their loader).
package lm

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/nn"
	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/kit"
)

// Config is the architecture of the language models.
type Config struct {
	Dim     int     `json:"dim"`    // word vector size
	Hidden  int     `json:"hidden"` // LSTM units per direction
	Layers  int     `json:"layers"`
	Dropout float64 `json:"dropout"` // on the word vectors, between layers and on the top states
}

// DefaultConfig is a one-layer LSTM of 256 units per direction over
// 100-dimensional word vectors: small enough to train on a CPU in an hour
// on 1.5M tokens.
func DefaultConfig() Config { return Config{Dim: 100, Hidden: 256, Layers: 1, Dropout: 0.2} }

func (c Config) validate() error {
	if c.Dim < 1 || c.Hidden < 1 || c.Layers < 1 {
		return fmt.Errorf("dim %d, hidden %d, layers %d: all must be positive", c.Dim, c.Hidden, c.Layers)
	}
	if c.Dropout < 0 || c.Dropout >= 1 {
		return fmt.Errorf("dropout %v, want [0, 1)", c.Dropout)
	}
	return nil
}

// Direction of a language model.
const (
	Forward  = 0
	Backward = 1
)

var dirNames = [2]string{"fwd", "bwd"}

// Model is the pair of language models. Its methods that compute run on a
// goroutine locked to its OS thread (libtorch keeps grad mode per thread);
// the exported ones lock it themselves.
type Model struct {
	Config Config
	Vocab  *Vocab

	device gotch.Device
	vs     *nn.VarStore
	emb    *ts.Tensor        // [V, Dim]
	lstm   [2][][]*ts.Tensor // per direction, per layer: w_ih, w_hh, b_ih, b_hh
	outW   *ts.Tensor        // [Hidden, V]
	outB   *ts.Tensor        // [V]
}

// New builds the models with weights drawn from seed.
func New(cfg Config, vocab *Vocab, seed uint64, device gotch.Device) (*Model, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("language model config: %w", err)
	}
	if vocab.Len() <= reserved {
		return nil, errors.New("language model: the vocabulary has no word")
	}
	m := &Model{Config: cfg, Vocab: vocab, device: device, vs: nn.NewVarStore(device)}
	rng := rand.New(rand.NewPCG(seed, 0x1a))
	p := &kit.Initializer{Rng: rng, Root: m.vs.Root(), Device: device}
	err := kit.Guard(func() {
		u := p.Uniform
		v := vocab.Len()
		m.emb = u("emb", math.Sqrt(3/float64(cfg.Dim)), v, cfg.Dim)
		bound := 1 / math.Sqrt(float64(cfg.Hidden))
		for d, dn := range dirNames {
			in := cfg.Dim
			for l := range cfg.Layers {
				m.lstm[d] = append(m.lstm[d], []*ts.Tensor{
					u(fmt.Sprintf("%s_w_ih_l%d", dn, l), bound, 4*cfg.Hidden, in),
					u(fmt.Sprintf("%s_w_hh_l%d", dn, l), bound, 4*cfg.Hidden, cfg.Hidden),
					u(fmt.Sprintf("%s_b_ih_l%d", dn, l), bound, 4*cfg.Hidden),
					u(fmt.Sprintf("%s_b_hh_l%d", dn, l), bound, 4*cfg.Hidden),
				})
				in = cfg.Hidden
			}
		}
		m.outW = u("out_w", bound, cfg.Hidden, v)
		m.outB = u("out_b", bound, v)
	})
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("language model: %w", err)
	}
	return m, nil
}

// Close frees the weights.
func (m *Model) Close() {
	if m.vs != nil {
		m.vs.Destroy()
		m.vs = nil
	}
}

// Device is where the models compute.
func (m *Model) Device() gotch.Device { return m.device }

// batch is sentences of word ids laid out for both directions: rows of
// T = longest+1 inputs, padded at the end.
type batch struct {
	n, t    int64
	lens    []int      // words per sentence
	inputs  [2][]int64 // [n*t] per direction
	targets [2][]int64 // the valid positions' targets, row by row
	valid   []int64    // flat indices (row*t + position) of the valid positions, same for both directions
}

func newBatch(sents [][]int64) *batch {
	b := &batch{n: int64(len(sents))}
	for _, s := range sents {
		b.t = max(b.t, int64(len(s)+1))
		b.lens = append(b.lens, len(s))
	}
	for d := range 2 {
		b.inputs[d] = make([]int64, b.n*b.t)
	}
	for i, s := range sents {
		row := int64(i) * b.t
		n := len(s)
		b.inputs[Forward][row], b.inputs[Backward][row] = Boundary, Boundary
		for j, w := range s {
			b.inputs[Forward][row+int64(j)+1] = w
			b.inputs[Backward][row+int64(j)+1] = s[n-1-j]
		}
		for j := range n + 1 {
			b.valid = append(b.valid, row+int64(j))
			fw, bw := int64(Boundary), int64(Boundary)
			if j < n {
				fw, bw = s[j], s[n-1-j]
			}
			b.targets[Forward] = append(b.targets[Forward], fw)
			b.targets[Backward] = append(b.targets[Backward], bw)
		}
	}
	return b
}

// states runs direction d over the batch and returns its top-layer states
// at the valid positions, [valid, Hidden] (position j of a row has read
// its inputs 0..j). With train, dropout masks come from rng.
func (m *Model) states(g *kit.Graph, b *batch, d int, train bool, rng *rand.Rand) *ts.Tensor {
	c := m.Config
	ids := g.Ints(b.inputs[d], b.n, b.t)
	x := g.T(ts.Embedding(m.emb, ids, -1, false, false)) // [n, t, Dim]
	for _, ws := range m.lstm[d] {
		if train {
			x = g.Dropout(x, c.Dropout, rng)
		}
		h0 := g.T(ts.Zeros([]int64{1, b.n, int64(c.Hidden)}, gotch.Float, m.device))
		out, _, _ := g.T3(ts.Lstm(x, []*ts.Tensor{h0, h0}, ws, true, 1, 0, train, false, true))
		x = out
	}
	x = g.T(x.Reshape([]int64{b.n * b.t, int64(c.Hidden)}, false)) // batch-first LSTM output is not contiguous
	x = g.T(x.IndexSelect(0, g.Ints(b.valid, int64(len(b.valid))), false))
	if train {
		x = g.Dropout(x, c.Dropout, rng)
	}
	return x
}

// logProbs turns states [k, Hidden] into log-probabilities over the
// vocabulary, [k, V].
func (m *Model) logProbs(g *kit.Graph, h *ts.Tensor) *ts.Tensor {
	logits := g.T(m.outB.Addmm(h, m.outW, false))
	return g.T(logits.LogSoftmax(1, gotch.Float, false))
}

// nll returns the summed negative log-likelihood of direction d's targets
// (a scalar tensor).
func (m *Model) nll(g *kit.Graph, b *batch, d int, train bool, rng *rand.Rand) *ts.Tensor {
	logp := m.logProbs(g, m.states(g, b, d, train, rng))
	k := int64(len(b.targets[d]))
	picked := g.T(logp.Gather(1, g.Ints(b.targets[d], k, 1), false, false))
	return g.T(g.T(picked.Sum(gotch.Float, false)).MulScalar(g.Scalar(-1), false))
}

// loss is the training objective: the mean over both directions of the
// mean negative log-likelihood per target.
func (m *Model) loss(g *kit.Graph, b *batch, train bool, rng *rand.Rand) *ts.Tensor {
	f := m.nll(g, b, Forward, train, rng)
	bw := m.nll(g, b, Backward, train, rng)
	return g.T(g.T(f.Add(bw, false)).MulScalar(g.Scalar(0.5/float64(len(b.valid))), false))
}

// parameters returns the weights by name, sorted.
func (m *Model) parameters() ([]string, []*ts.Tensor) {
	return kit.SplitNamed(kit.NamedParams(m.vs))
}
