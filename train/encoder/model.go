package encoder

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
)

// Model is a transformer encoder over words and their spellings, with a
// masked-LM head whose output layer is tied to the input word vectors.
// Its methods that compute run on a goroutine locked to its OS thread
// (libtorch keeps grad mode per thread); the exported ones lock it
// themselves.
type Model struct {
	Config Config
	Vocab  *Vocab

	device gotch.Device
	vs     *nn.VarStore

	wordEmb        *ts.Tensor // [V, WordDim]; also the output layer
	charEmb        *ts.Tensor // [chars, CharDim]
	convW, convB   *ts.Tensor // [CharFilters, CharDim, 3], [CharFilters]
	inW, inB       *ts.Tensor // [Dim, WordDim+CharFilters]
	pos            *ts.Tensor // [MaxLen, Dim]
	embLNw, embLNb *ts.Tensor
	layers         []layer
	finalLNw       *ts.Tensor // pre-LN only: the norm after the last layer
	finalLNb       *ts.Tensor
	headW, headB   *ts.Tensor // [WordDim, Dim]
	headLNw        *ts.Tensor
	headLNb        *ts.Tensor
	outB           *ts.Tensor // [V]
}

// layer is one transformer layer's weights.
type layer struct {
	qkvW, qkvB   *ts.Tensor // [3 Dim, Dim]: queries, keys, values
	outW, outB   *ts.Tensor // [Dim, Dim]
	ln1w, ln1b   *ts.Tensor
	ffn1W, ffn1B *ts.Tensor // [FFN, Dim]
	ffn2W, ffn2B *ts.Tensor // [Dim, FFN]
	ln2w, ln2b   *ts.Tensor
}

// initStd is the spread of the initial word and position vectors (BERT's).
// The dense layers start at 1/sqrt(fan-in) instead of BERT's 0.02: at the
// widths a CPU trains (64-256), 0.02 makes the attention's contribution so
// small that a model plateaus for hundreds of steps before it uses the
// context (measured on the tests' topics text).
const initStd = 0.02

// New builds an encoder with weights drawn from seed. With table (nil for
// none), the word vectors of the words it has (looked up as package
// embeddings does: lower case, then digit shape) start from the table's,
// which must have WordDim dimensions; the others are drawn at the table's
// spread.
func New(cfg Config, vocab *Vocab, table *embeddings.Table, seed uint64, device gotch.Device) (*Model, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("encoder config: %w", err)
	}
	if vocab.Len() <= reserved {
		return nil, errors.New("encoder: the vocabulary has no word")
	}
	if table != nil && table.Dim != cfg.WordDim {
		return nil, fmt.Errorf("encoder: word vectors of %d dimensions, word_dim is %d", table.Dim, cfg.WordDim)
	}
	m := &Model{Config: cfg, Vocab: vocab, device: device, vs: nn.NewVarStore(device)}
	rng := rand.New(rand.NewPCG(seed, 0xe1c))
	root := m.vs.Root()
	err := kit.Guard(func() {
		p := params{root: root, device: device, rng: rng}
		v, d := vocab.Len(), cfg.Dim
		// The sublayers that write into the residual stream start smaller
		// with depth (GPT-2's scaling), so that the stream's spread does
		// not grow with the number of layers.
		residual := 1 / math.Sqrt(float64(2*cfg.Layers))
		m.wordEmb = p.add("word_emb", wordVectors(vocab, table, cfg.WordDim, rng), v, cfg.WordDim)
		m.charEmb = (&kit.Initializer{Rng: rng, Root: root, Device: device}).CharVectors("char_emb", len(vocab.Chars), cfg.CharDim)
		m.convW = p.normal("char_conv_w", 1/math.Sqrt(float64(3*cfg.CharDim)), cfg.CharFilters, cfg.CharDim, 3)
		m.convB = p.zeros("char_conv_b", cfg.CharFilters)
		m.inW = p.linear("in_w", 1, d, cfg.WordDim+cfg.CharFilters)
		m.inB = p.zeros("in_b", d)
		m.pos = p.normal("pos_emb", initStd, cfg.MaxLen, d)
		m.embLNw, m.embLNb = p.ones("emb_ln_w", d), p.zeros("emb_ln_b", d)
		for l := range cfg.Layers {
			n := func(s string) string { return fmt.Sprintf("layer%02d_%s", l, s) }
			m.layers = append(m.layers, layer{
				qkvW: p.linear(n("qkv_w"), 1, 3*d, d), qkvB: p.zeros(n("qkv_b"), 3*d),
				outW: p.linear(n("attn_out_w"), residual, d, d), outB: p.zeros(n("attn_out_b"), d),
				ln1w: p.ones(n("ln1_w"), d), ln1b: p.zeros(n("ln1_b"), d),
				ffn1W: p.linear(n("ffn1_w"), 1, cfg.FFN, d), ffn1B: p.zeros(n("ffn1_b"), cfg.FFN),
				ffn2W: p.linear(n("ffn2_w"), residual, d, cfg.FFN), ffn2B: p.zeros(n("ffn2_b"), d),
				ln2w: p.ones(n("ln2_w"), d), ln2b: p.zeros(n("ln2_b"), d),
			})
		}
		if cfg.PreLN {
			m.finalLNw, m.finalLNb = p.ones("final_ln_w", d), p.zeros("final_ln_b", d)
		}
		m.headW, m.headB = p.linear("head_w", 1, cfg.WordDim, d), p.zeros("head_b", cfg.WordDim)
		m.headLNw, m.headLNb = p.ones("head_ln_w", cfg.WordDim), p.zeros("head_ln_b", cfg.WordDim)
		m.outB = p.zeros("out_b", v)
	})
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("encoder: %w", err)
	}
	return m, nil
}

// wordVectors draws the initial word vectors: the table's where it has
// the word, else normal at the table's spread (initStd without a table).
// The reserved rows (padding, unknown, mask) are drawn too; padding's is
// never read.
func wordVectors(vocab *Vocab, table *embeddings.Table, dim int, rng *rand.Rand) []float32 {
	std := initStd
	if table != nil && len(table.Vectors) > 0 {
		var s, s2 float64
		for _, x := range table.Vectors {
			s += float64(x)
			s2 += float64(x) * float64(x)
		}
		n := float64(len(table.Vectors))
		std = math.Sqrt(max(s2/n-(s/n)*(s/n), 1e-12))
	}
	out := make([]float32, vocab.Len()*dim)
	for i, w := range vocab.Words {
		row := out[i*dim : (i+1)*dim]
		if table != nil && i >= reserved {
			j, ok := table.Lookup(w)
			if !ok {
				j, ok = table.Lookup(embeddings.Shape(w))
			}
			if ok {
				copy(row, table.Vector(j))
				continue
			}
		}
		for k := range row {
			row[k] = float32(rng.NormFloat64() * std)
		}
	}
	return out
}

// params adds named weights to a var store.
type params struct {
	root   *nn.Path
	device gotch.Device
	rng    *rand.Rand
}

func (p params) add(name string, data []float32, shape ...int) *ts.Tensor {
	dims := make([]int64, len(shape))
	for i, d := range shape {
		dims[i] = int64(d)
	}
	g := kit.NewGraph(p.device)
	defer g.Free()
	x := g.Floats(data, dims...)
	v, err := p.root.Add(name, x, true)
	g.Check(err)
	return v
}

func size(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

func (p params) normal(name string, std float64, shape ...int) *ts.Tensor {
	data := make([]float32, size(shape))
	for i := range data {
		data[i] = float32(p.rng.NormFloat64() * std)
	}
	return p.add(name, data, shape...)
}

// linear draws a dense layer's weights [out, in] at scale/sqrt(in).
func (p params) linear(name string, scale float64, out, in int) *ts.Tensor {
	return p.normal(name, scale/math.Sqrt(float64(in)), out, in)
}

func (p params) zeros(name string, shape ...int) *ts.Tensor {
	return p.add(name, make([]float32, size(shape)), shape...)
}

func (p params) ones(name string, shape ...int) *ts.Tensor {
	data := make([]float32, size(shape))
	for i := range data {
		data[i] = 1
	}
	return p.add(name, data, shape...)
}

// Close frees the weights.
func (m *Model) Close() {
	if m.vs != nil {
		m.vs.Destroy()
		m.vs = nil
	}
}

// Device is where the model computes.
func (m *Model) Device() gotch.Device { return m.device }

// layerNormEps is BERT's.
const layerNormEps = 1e-12

func layerNorm(g *kit.Graph, x, w, b *ts.Tensor) *ts.Tensor {
	shape, err := w.Size()
	g.Check(err)
	return g.T(ts.LayerNorm(x, shape, w, b, layerNormEps, false))
}

// embed returns the input vectors of a batch, [n, t, Dim]: the word
// vector and the character CNN's features of each token, projected to Dim,
// plus the position's vector, normalized.
func (m *Model) embed(g *kit.Graph, b *batch, train_ bool, rng *rand.Rand) *ts.Tensor {
	c := m.Config
	words := g.T(ts.Embedding(m.wordEmb, g.Ints(b.ids, b.n*b.t), Pad, false, false)) // [n*t, WordDim]
	// The character CNN reads the real tokens only; padding positions get
	// zero features (row 0 of the table gathered from).
	feat := g.CharCNN(m.charEmb, m.convW, m.convB, kit.NewCharRows(b.spellings)) // [tokens, F]
	zero := g.T(ts.Zeros([]int64{1, int64(c.CharFilters)}, gotch.Float, m.device))
	feat = g.T(ts.Cat([]*ts.Tensor{zero, feat}, 0))
	feat = g.T(feat.IndexSelect(0, g.Ints(b.charRow, b.n*b.t), false)) // [n*t, F]
	x := g.T(ts.Cat([]*ts.Tensor{words, feat}, 1))
	x = g.T(ts.Linear(x, m.inW, m.inB))
	x = g.T(x.View([]int64{b.n, b.t, int64(c.Dim)}, false))
	x = g.T(x.Add(g.T(m.pos.Narrow(0, 0, b.t, false)), false))
	x = layerNorm(g, x, m.embLNw, m.embLNb)
	if train_ {
		x = g.Dropout(x, c.Dropout, rng)
	}
	return x
}

// attention is multi-head self-attention over x [n, t, Dim]; keyBias
// [n, 1, 1, t] is 0 for real tokens and a large negative number for
// padding, which no position attends to.
func (m *Model) attention(g *kit.Graph, l *layer, x, keyBias *ts.Tensor, n, t int64, train_ bool, rng *rand.Rand) *ts.Tensor {
	c := m.Config
	d, h := int64(c.Dim), int64(c.Heads)
	dh := d / h
	qkv := g.T(ts.Linear(x, l.qkvW, l.qkvB)) // [n, t, 3d]
	split := func(i int64) *ts.Tensor {
		part := g.T(qkv.Narrow(2, i*d, d, false))
		part = g.T(part.Reshape([]int64{n, t, h, dh}, false))
		return g.T(part.Transpose(1, 2, false)) // [n, h, t, dh]
	}
	q, k, v := split(0), split(1), split(2)
	scores := g.T(q.Matmul(g.T(k.Transpose(2, 3, false)), false)) // [n, h, t, t]
	scores = g.T(scores.MulScalar(g.Scalar(1/math.Sqrt(float64(dh))), false))
	scores = g.T(scores.Add(keyBias, false))
	probs := g.T(scores.Softmax(3, gotch.Float, false))
	if train_ {
		probs = g.Dropout(probs, c.AttnDropout, rng)
	}
	ctx := g.T(probs.Matmul(v, false))    // [n, h, t, dh]
	ctx = g.T(ctx.Transpose(1, 2, false)) // [n, t, h, dh]
	ctx = g.T(ctx.Reshape([]int64{n, t, d}, false))
	return g.T(ts.Linear(ctx, l.outW, l.outB))
}

func (m *Model) feedForward(g *kit.Graph, l *layer, x *ts.Tensor) *ts.Tensor {
	y := g.T(ts.Linear(x, l.ffn1W, l.ffn1B))
	y = g.T(y.Gelu("none", false))
	return g.T(ts.Linear(y, l.ffn2W, l.ffn2B))
}

// padBias is what padding adds to an attention score: its weight after
// the softmax is exactly 0 in float32.
const padBias = -1e9

// encode runs the encoder over a batch and returns the top states,
// [n, t, Dim] (padding positions hold values nobody reads). With train,
// dropout masks come from rng.
func (m *Model) encode(g *kit.Graph, b *batch, train_ bool, rng *rand.Rand) *ts.Tensor {
	c := m.Config
	x := m.embed(g, b, train_, rng)
	bias := make([]float32, b.n*b.t)
	for i, n := range b.lens {
		row := bias[int64(i)*b.t : int64(i+1)*b.t]
		for j := n; j < len(row); j++ {
			row[j] = padBias
		}
	}
	keyBias := g.Floats(bias, b.n, 1, 1, b.t)
	drop := func(y *ts.Tensor) *ts.Tensor {
		if train_ {
			return g.Dropout(y, c.Dropout, rng)
		}
		return y
	}
	for i := range m.layers {
		l := &m.layers[i]
		if c.PreLN {
			x = g.T(x.Add(drop(m.attention(g, l, layerNorm(g, x, l.ln1w, l.ln1b), keyBias, b.n, b.t, train_, rng)), false))
			x = g.T(x.Add(drop(m.feedForward(g, l, layerNorm(g, x, l.ln2w, l.ln2b))), false))
		} else {
			x = layerNorm(g, g.T(x.Add(drop(m.attention(g, l, x, keyBias, b.n, b.t, train_, rng)), false)), l.ln1w, l.ln1b)
			x = layerNorm(g, g.T(x.Add(drop(m.feedForward(g, l, x)), false)), l.ln2w, l.ln2b)
		}
	}
	if c.PreLN {
		x = layerNorm(g, x, m.finalLNw, m.finalLNb)
	}
	return x
}

// logits is the masked-LM head over states [k, Dim]: a dense layer, GELU
// and a norm down to WordDim, then scores against every word vector (the
// input embedding, tied) plus a bias per word; [k, V].
func (m *Model) logits(g *kit.Graph, h *ts.Tensor, train_ bool, rng *rand.Rand) *ts.Tensor {
	y := g.T(ts.Linear(h, m.headW, m.headB))
	y = g.T(y.Gelu("none", false))
	y = layerNorm(g, y, m.headLNw, m.headLNb)
	if train_ {
		y = g.Dropout(y, m.Config.Dropout, rng)
	}
	return g.T(m.outB.Addmm(y, g.T(m.wordEmb.Transpose(0, 1, false)), false))
}

// mlmLoss returns the summed negative log-likelihood of the batch's
// targets at its predicted positions (a scalar tensor), and their count.
func (m *Model) mlmLoss(g *kit.Graph, b *batch, train_ bool, rng *rand.Rand) (*ts.Tensor, int) {
	k := int64(len(b.predict))
	if k == 0 {
		return g.T(ts.Zeros([]int64{}, gotch.Float, m.device)), 0
	}
	x := m.encode(g, b, train_, rng)
	x = g.T(x.View([]int64{b.n * b.t, int64(m.Config.Dim)}, false))
	x = g.T(x.IndexSelect(0, g.Ints(b.predict, k), false))
	logp := g.T(m.logits(g, x, train_, rng).LogSoftmax(1, gotch.Float, false))
	picked := g.T(logp.Gather(1, g.Ints(b.targets, k, 1), false, false))
	return g.T(g.T(picked.Sum(gotch.Float, false)).MulScalar(g.Scalar(-1), false)), int(k)
}

// parameters returns the weights by name, sorted.
func (m *Model) parameters() ([]string, []*ts.Tensor) {
	return kit.SplitNamed(kit.NamedParams(m.vs))
}
