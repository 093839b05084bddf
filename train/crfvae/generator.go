package crfvae

import (
	"cmp"
	"errors"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/nn"
	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/kit"
)

// The generative models p(x | y) of the tokens given the tags. Each reads
// (relaxed) one-hot tags y [B, T, K] through a tag embedding and returns
// logits over the generator's vocabulary [B, T, V].
const (
	// Factored generates each token from its own tag alone:
	// p(x_t | y) = softmax(W (y_t E) + b)[x_t].
	Factored = "factored"
	// Transformer generates each token from all the tags: a one-layer
	// transformer encoder over the tag embeddings (plus sinusoidal
	// positions), then a softmax over the vocabulary at each position.
	Transformer = "transformer"
)

// Generators lists the generative models.
var Generators = []string{Factored, Transformer}

// generator holds the weights of one generative model.
type generator struct {
	kind string
	dim  int64
	// names and params list every weight, for the optimizer.
	names  []string
	params []*ts.Tensor
	// tagEmb [K, d]; outW [V, d], outB [V] map a position's state to
	// vocabulary logits.
	tagEmb, outW, outB *ts.Tensor
	// The transformer layer: attention projections, feed-forward, and the
	// two layer norms.
	heads                          int64
	wq, bq, wk, bk, wv, bv, wo, bo *ts.Tensor
	w1, b1, w2, b2                 *ts.Tensor
	ln1w, ln1b, ln2w, ln2b         *ts.Tensor
}

// newGenerator creates a generator's weights in vs, drawn from seed; inside
// kit.Guard.
func newGenerator(cfg Config, vs *nn.VarStore, device gotch.Device, k, vocab int, seed uint64) (*generator, error) {
	d := cfg.GenDim
	rng := rand.New(rand.NewPCG(seed, 0x9e7))
	init := &kit.Initializer{Rng: rng, Root: vs.Root(), Device: device}
	gen := &generator{kind: cfg.Generator, dim: int64(d)}
	param := func(name string, bound float64, shape ...int) *ts.Tensor {
		x := init.Uniform(name, bound, shape...)
		gen.names, gen.params = append(gen.names, name), append(gen.params, x)
		return x
	}
	var fillErr error
	constant := func(name string, v float64, n int) *ts.Tensor {
		x := param(name, 0, n)
		if v != 0 {
			ts.NoGrad(func() { fillErr = errors.Join(fillErr, x.Fill_(ts.FloatScalar(v))) })
		}
		return x
	}
	lin := 1 / math.Sqrt(float64(d))
	gen.tagEmb = param("tag_emb", math.Sqrt(3/float64(d)), k, d)
	gen.outW, gen.outB = param("out_w", lin, vocab, d), param("out_b", lin, vocab)
	if cfg.Generator != Transformer {
		return gen, nil
	}
	gen.heads = int64(cfg.Heads)
	gen.wq, gen.bq = param("attn_q_w", lin, d, d), param("attn_q_b", lin, d)
	gen.wk, gen.bk = param("attn_k_w", lin, d, d), param("attn_k_b", lin, d)
	gen.wv, gen.bv = param("attn_v_w", lin, d, d), param("attn_v_b", lin, d)
	gen.wo, gen.bo = param("attn_o_w", lin, d, d), param("attn_o_b", lin, d)
	gen.w1, gen.b1 = param("ff_1_w", lin, 2*d, d), param("ff_1_b", lin, 2*d)
	gen.w2, gen.b2 = param("ff_2_w", 1/math.Sqrt(float64(2*d)), d, 2*d), param("ff_2_b", lin, d)
	gen.ln1w, gen.ln1b = constant("ln_1_w", 1, d), constant("ln_1_b", 0, d)
	gen.ln2w, gen.ln2b = constant("ln_2_w", 1, d), constant("ln_2_b", 0, d)
	return gen, fillErr
}

// logits maps tags y [B, T, K] to vocabulary logits [B, T, V]; lengths
// are the sentences' (the transformer attends within each sentence only).
func (gen *generator) logits(g *kit.Graph, y *ts.Tensor, lengths []int) *ts.Tensor {
	h := g.T(y.Matmul(gen.tagEmb, false)) // [B, T, d]
	if gen.kind == Transformer {
		h = gen.encode(g, h, lengths)
	}
	return g.T(ts.Linear(h, gen.outW, gen.outB))
}

// encode is the transformer layer (post-norm, as Vaswani et al. 2017):
//
//	h = LN(h + Attention(h)),  h = LN(h + W2 relu(W1 h))
func (gen *generator) encode(g *kit.Graph, h *ts.Tensor, lengths []int) *ts.Tensor {
	shape, err := h.Size()
	g.Check(err)
	b, t, d := shape[0], shape[1], shape[2]
	h = g.T(h.Add(g.Floats(positions(int(t), int(d)), 1, t, d), false))

	heads, dh := gen.heads, d/gen.heads
	split := func(w, bias *ts.Tensor) *ts.Tensor { // [B, H, T, dh]
		x := g.T(ts.Linear(h, w, bias))
		x = g.T(x.View([]int64{b, t, heads, dh}, false))
		return g.T(x.Transpose(1, 2, false))
	}
	q, k, v := split(gen.wq, gen.bq), split(gen.wk, gen.bk), split(gen.wv, gen.bv)
	scores := g.T(q.Matmul(g.T(k.Transpose(2, 3, false)), false))
	scores = g.T(scores.MulScalar(g.Scalar(1/math.Sqrt(float64(dh))), false))
	// Keys past a sentence's end get -1e9: no attention.
	keyMask := make([]float32, b*t)
	for i, n := range lengths {
		for s := n; s < int(t); s++ {
			keyMask[int64(i)*t+int64(s)] = -1e9
		}
	}
	scores = g.T(scores.Add(g.Floats(keyMask, b, 1, 1, t), false))
	att := g.T(scores.Softmax(3, gotch.Float, false))
	ctx := g.T(att.Matmul(v, false)) // [B, H, T, dh]
	ctx = g.T(g.T(ctx.Transpose(1, 2, false)).Contiguous(false))
	ctx = g.T(ts.Linear(g.T(ctx.View([]int64{b, t, d}, false)), gen.wo, gen.bo))
	h = g.T(ts.LayerNorm(g.T(h.Add(ctx, false)), []int64{d}, gen.ln1w, gen.ln1b, 1e-5, false))
	ff := g.T(g.T(ts.Linear(h, gen.w1, gen.b1)).Relu(false))
	ff = g.T(ts.Linear(ff, gen.w2, gen.b2))
	return g.T(ts.LayerNorm(g.T(h.Add(ff, false)), []int64{d}, gen.ln2w, gen.ln2b, 1e-5, false))
}

// positions are the sinusoidal position encodings of Vaswani et al. (2017),
// [t, d] row by row: no weights, and no length limit.
func positions(t, d int) []float32 {
	out := make([]float32, t*d)
	for p := range t {
		for i := 0; i < d; i += 2 {
			angle := float64(p) / math.Pow(10000, float64(i)/float64(d))
			out[p*d+i] = float32(math.Sin(angle))
			if i+1 < d {
				out[p*d+i+1] = float32(math.Cos(angle))
			}
		}
	}
	return out
}

// vocabulary is the generator's output vocabulary: the most frequent
// tokens of the unlabeled sentences, index 0 standing for every other.
type vocabulary struct {
	ids map[string]int
}

func newVocabulary(sentences [][]string, size int) *vocabulary {
	counts := map[string]int{}
	for _, s := range sentences {
		for _, tok := range s {
			counts[tok]++
		}
	}
	words := make([]string, 0, len(counts))
	for w := range counts {
		words = append(words, w)
	}
	slices.SortFunc(words, func(a, b string) int {
		if counts[a] != counts[b] {
			return counts[b] - counts[a]
		}
		return cmp.Compare(a, b)
	})
	v := &vocabulary{ids: map[string]int{}}
	for i, w := range words[:min(len(words), size-1)] {
		v.ids[w] = i + 1
	}
	return v
}

// size counts the rare-word index.
func (v *vocabulary) size() int { return len(v.ids) + 1 }

func (v *vocabulary) id(tok string) int64 { return int64(v.ids[tok]) }
