package kit

import (
	"encoding/binary"

	"github.com/sugarme/gotch/ts"
)

// PadChar is the character id that fills the rows of short spellings; its
// vector is zero and stays so (see Initializer.CharVectors).
const PadChar = 0

// CharRows lays out a batch's tokens for CharCNN, one row per distinct
// spelling (sequence of character ids): the CNN runs once per spelling and
// its features are gathered back per token. A batch of 32 CoNLL-2003
// sentences spells about 40% of its tokens again ("the", ",", "."); the CNN
// is deterministic and the gradient sums over a row's tokens, so features
// and gradients are those of a row per token.
type CharRows struct {
	IDs    []int64   // Rows × Length character ids, padded with PadChar
	Mask   []float32 // what the CNN adds to its feature maps: 0 on characters, -1e4 on padding
	Length int       // the longest spelling's
	Rows   int       // distinct spellings
	Of     []int64   // each token's row; nil for a row per token
	// Features, when set, holds the rows' features, computed beforehand
	// (a prediction's table of spellings); IDs and Mask are then nil.
	Features *ts.Tensor
}

// NewCharRows lays out the character ids of tokens, one row per distinct
// spelling.
func NewCharRows(tokens [][]int64) CharRows {
	spellings, of := DistinctSpellings(tokens)
	r := PadSpellings(spellings)
	if len(spellings) < len(tokens) {
		r.Of = of
	}
	return r
}

// DistinctSpellings returns the distinct spellings among tokens, in order
// of first sight, and each token's index among them.
func DistinctSpellings(tokens [][]int64) (spellings [][]int64, of []int64) {
	of = make([]int64, len(tokens))
	// A spelling's key is its ids as bytes (ids fit in 32 bits).
	seen := make(map[string]int64, len(tokens))
	var key []byte
	for p, cs := range tokens {
		key = key[:0]
		for _, c := range cs {
			key = binary.LittleEndian.AppendUint32(key, uint32(c))
		}
		i, ok := seen[string(key)]
		if !ok {
			i = int64(len(spellings))
			seen[string(key)] = i
			spellings = append(spellings, cs)
		}
		of[p] = i
	}
	return spellings, of
}

// PadSpellings lays out spellings as rows of the longest one's length, a
// row each.
func PadSpellings(spellings [][]int64) CharRows {
	r := CharRows{Rows: len(spellings)}
	for _, cs := range spellings {
		r.Length = max(r.Length, len(cs))
	}
	r.IDs = make([]int64, r.Rows*r.Length)
	r.Mask = make([]float32, r.Rows*r.Length)
	for i, cs := range spellings {
		row := r.IDs[i*r.Length : (i+1)*r.Length]
		m := r.Mask[i*r.Length : (i+1)*r.Length]
		copy(row, cs)
		for c := len(cs); c < r.Length; c++ {
			row[c] = PadChar
			m[c] = -1e4
		}
	}
	return r
}

// CharCNN computes the character features of the tokens laid out in r:
// character vectors (emb, [chars, Ec]), a convolution (convW, [F, Ec,
// kernel], odd kernel, same padding) with bias convB [F], and a max over
// each spelling's characters, gathered per token: [tokens, F]. Inside
// Guard.
func (g *Graph) CharCNN(emb, convW, convB *ts.Tensor, r CharRows) *ts.Tensor {
	feat := r.Features
	if feat == nil {
		shape, err := convW.Size()
		g.Check(err)
		dim, kernel := shape[1], shape[2]
		rows, length := int64(r.Rows), int64(r.Length)
		ids := g.Ints(r.IDs, rows*length)
		ce := g.T(ts.Embedding(emb, ids, PadChar, false, false))                                 // [rows*L, Ec]
		ce = g.T(ce.View([]int64{rows, length, dim}, false))                                     // [rows, L, Ec]
		ce = g.T(ce.Transpose(1, 2, false))                                                      // [rows, Ec, L]
		conv := g.T(ts.Conv1d(ce, convW, convB, []int64{1}, []int64{kernel / 2}, []int64{1}, 1)) // [rows, F, L]
		conv = g.T(conv.Add(g.Floats(r.Mask, rows, 1, length), false))                           // padding never wins the max
		feat = g.T(conv.Amax([]int64{2}, false, false))                                          // [rows, F]
	}
	if r.Of == nil {
		return feat
	}
	return g.T(feat.IndexSelect(0, g.Ints(r.Of, int64(len(r.Of))), false))
}
