package encoder

import (
	"math/rand/v2"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/augment"
	"github.com/nerflow/nerflow/kit"
	"github.com/nerflow/nerflow/train/tagger"
)

// Kind names the encoder among the language models a tagger can read
// (tagger.RegisterLanguageModel): its top states serve as frozen features,
// as TagLM's LSTM states do.
const Kind = "encoder"

func init() {
	tagger.RegisterLanguageModel(Kind, func(dir string, device gotch.Device) (tagger.LanguageModel, error) {
		return Load(dir, device)
	})
	tagger.RegisterLanguageModelFile(ModelFile, Kind) // train.tagger's lm input
	// Fine-tuned under a tagger (train.tagger's encoder input).
	tagger.RegisterEncoder(Kind, ModelFile, func(dir string, device gotch.Device) (tagger.Encoder, error) {
		return Load(dir, device)
	})
	// RoSTER's augmentation can draw from the masked-LM head
	// (augment.sentences, input lm).
	augment.RegisterMaskedLM(ModelFile, func(dir string, device gotch.Device) (augment.MaskedLM, error) {
		return Load(dir, device)
	})
}

var (
	_ tagger.LanguageModel = (*Model)(nil)
	_ tagger.Encoder       = (*Model)(nil)
	_ augment.MaskedLM     = (*Model)(nil)
)

// Kind is the encoder's kind for tagger.RegisterLanguageModel.
func (m *Model) Kind() string { return Kind }

// StateDim is the size of a token's state: the encoder's width.
func (m *Model) StateDim() int { return m.Config.Dim }

// TokenStates returns the top states of every token, [sentence][token][Dim],
// without dropout or gradient, nothing masked. A sentence longer than
// MaxLen is read in consecutive windows of MaxLen tokens. The caller holds
// its OS thread (tagger.LanguageModel); TokenStates locks it too.
func (m *Model) TokenStates(sentences [][]string) ([][][]float32, error) {
	out := make([][][]float32, len(sentences))
	for i, s := range sentences {
		out[i] = make([][]float32, len(s))
	}
	pieces, where := m.pieces(sentences)
	if len(pieces) == 0 {
		return out, nil
	}
	b := newBatch(pieces)
	d := int64(m.Config.Dim)
	var states []float32
	var err error
	kit.NoGrad(func() {
		g := kit.NewGraph(m.device)
		defer g.Free()
		err = kit.Guard(func() { states = kit.Float32s(m.encode(g, b, false, nil)) })
	})
	if err != nil {
		return nil, err
	}
	for r, p := range where {
		for j := range b.lens[r] {
			at := (int64(r)*b.t + int64(j)) * d
			out[p[0]][p[1]+j] = states[at : at+d]
		}
	}
	return out, nil
}

// pieces cuts sentences into windows of at most MaxLen tokens, unmasked,
// and returns them with, for each window, its sentence and first token.
func (m *Model) pieces(sentences [][]string) ([]maskedSentence, [][2]int) {
	var pieces []maskedSentence
	var where [][2]int
	for i, s := range sentences {
		for off := 0; off < len(s); off += m.Config.MaxLen {
			pieces = append(pieces, m.Vocab.mask(s[off:min(off+m.Config.MaxLen, len(s))], Masking{}, nil))
			where = append(where, [2]int{i, off})
		}
	}
	return pieces, where
}

// States computes the top states of every token of the sentences in g,
// [tokens, Dim], sentence after sentence, for a tagger that fine-tunes the
// encoder (tagger.Encoder): the gradient reaches the weights. With train,
// dropout masks come from rng. A sentence longer than MaxLen is read in
// consecutive windows, as TokenStates does. Inside kit.Guard, on the
// computing thread.
func (m *Model) States(g *kit.Graph, sentences [][]string, train bool, rng *rand.Rand) *ts.Tensor {
	pieces, where := m.pieces(sentences)
	d := int64(m.Config.Dim)
	if len(pieces) == 0 {
		return g.T(ts.Zeros([]int64{0, d}, gotch.Float, m.device))
	}
	b := newBatch(pieces)
	// Row r of the batch holds window where[r]: its tokens go at the
	// sentence's offset in the output.
	start := make([]int, len(sentences)+1)
	for i, s := range sentences {
		start[i+1] = start[i] + len(s)
	}
	index := make([]int64, start[len(sentences)])
	for r, w := range where {
		for j := range b.lens[r] {
			index[start[w[0]]+w[1]+j] = int64(r)*b.t + int64(j)
		}
	}
	x := m.encode(g, b, train, rng)
	x = g.T(x.View([]int64{b.n * b.t, d}, false))
	return g.T(x.IndexSelect(0, g.Ints(index, int64(len(index))), false))
}

// Weights are the encoder's parameters by name (tagger.Encoder).
func (m *Model) Weights() []ts.NamedTensor { return m.named() }
