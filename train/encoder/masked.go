package encoder

import (
	"fmt"
	"math"

	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/kit"
	"github.com/nerflow/nerflow/train/lm"
)

// MaskedLogProbs returns, for each query, the masked-LM head's
// log-probabilities over the vocabulary of the word at its position,
// renormalized over the real words (the reserved ids get -Inf: a sampler
// must not put padding, the unknown word or the mask into a sentence).
//
// Unlike the LSTM language models' (lm.Model.MaskedLogProbs), the queries
// of one sentence are masked together and read in one pass, as the
// encoder was trained: RoSTER's augmentation masks 15% of a sentence at
// once. A sentence longer than MaxLen is read in windows. It locks the
// calling goroutine to its OS thread.
func (m *Model) MaskedLogProbs(sentences [][]string, queries []lm.Masked, batchSize int) ([][]float64, error) {
	out := make([][]float64, len(queries))
	v := m.Vocab.Len()
	err := m.maskedLogits(sentences, queries, batchSize, func(g *kit.Graph, order []int, logits *ts.Tensor) {
		flat := kit.Float32s(logits)
		for k, qi := range order {
			out[qi] = logSoftmaxWords(flat[k*v : (k+1)*v])
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// MaskedTopK returns, for each query, the k most likely real words of
// MaskedLogProbs's distribution, best first, ranked on the model's device:
// k words per position reach the host instead of the vocabulary's
// distribution. The scores are the head's logits (log-probabilities up to
// the position's normalizer). It locks the calling goroutine to its OS
// thread.
func (m *Model) MaskedTopK(sentences [][]string, queries []lm.Masked, k, batchSize int) ([][]lm.Candidate, error) {
	out := make([][]lm.Candidate, len(queries))
	err := m.maskedLogits(sentences, queries, batchSize, func(g *kit.Graph, order []int, logits *ts.Tensor) {
		ids, vals := g.TopK(logits, reserved, k)
		lm.SetTopK(out, order, ids, vals, k)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// maskedLogits masks the queries' positions, each sentence's together,
// reads batchSize windows at a time, and hands f each batch's queries (in
// the order of its rows) with the head's logits at their positions,
// [len(order), vocabulary], in the batch's graph.
func (m *Model) maskedLogits(sentences [][]string, queries []lm.Masked, batchSize int, f func(g *kit.Graph, order []int, logits *ts.Tensor)) error {
	if batchSize < 1 {
		return fmt.Errorf("masked words: batch size %d", batchSize)
	}
	// One row per window of a sentence that holds a query.
	type window struct{ sentence, offset int }
	rowOf := map[window]int{}
	var rows []window
	var asked [][]int // per row: the queries it answers
	for qi, q := range queries {
		if q.Sentence < 0 || q.Sentence >= len(sentences) || q.Position < 0 || q.Position >= len(sentences[q.Sentence]) {
			return fmt.Errorf("masked word %d: sentence %d position %d is outside the text", qi, q.Sentence, q.Position)
		}
		w := window{q.Sentence, q.Position - q.Position%m.Config.MaxLen}
		r, ok := rowOf[w]
		if !ok {
			r = len(rows)
			rowOf[w] = r
			rows = append(rows, w)
			asked = append(asked, nil)
		}
		asked[r] = append(asked[r], qi)
	}
	var err error
	kit.NoGrad(func() {
		for start := 0; start < len(rows) && err == nil; start += batchSize {
			end := min(start+batchSize, len(rows))
			var sents []maskedSentence
			var order []int // queries in the order of the batch's predicted positions
			for r := start; r < end; r++ {
				w := rows[r]
				words := sentences[w.sentence][w.offset:min(w.offset+m.Config.MaxLen, len(sentences[w.sentence]))]
				s := m.Vocab.mask(words, Masking{}, nil)
				for _, qi := range asked[r] {
					p := queries[qi].Position - w.offset
					s.ids[p], s.spellings[p] = Mask, []int64{maskChar}
				}
				sents = append(sents, s)
			}
			b := newBatch(sents)
			for r := start; r < end; r++ {
				for _, qi := range asked[r] {
					b.predict = append(b.predict, int64(r-start)*b.t+int64(queries[qi].Position-rows[r].offset))
					order = append(order, qi)
				}
			}
			g := kit.NewGraph(m.device)
			err = kit.Guard(func() {
				x := m.encode(g, b, false, nil)
				x = g.T(x.View([]int64{b.n * b.t, int64(m.Config.Dim)}, false))
				x = g.T(x.IndexSelect(0, g.Ints(b.predict, int64(len(b.predict))), false))
				f(g, order, m.logits(g, x, false, nil))
			})
			g.Free()
		}
	})
	return err
}

// logSoftmaxWords normalizes logits over the non-reserved ids; the
// reserved ones get -Inf.
func logSoftmaxWords(logits []float32) []float64 {
	out := make([]float64, len(logits))
	maxv := math.Inf(-1)
	for _, x := range logits[reserved:] {
		maxv = max(maxv, float64(x))
	}
	var z float64
	for _, x := range logits[reserved:] {
		z += math.Exp(float64(x) - maxv)
	}
	logZ := maxv + math.Log(z)
	for i, x := range logits {
		if i < reserved {
			out[i] = math.Inf(-1)
			continue
		}
		out[i] = float64(x) - logZ
	}
	return out
}

// Words is the vocabulary, indexed like MaskedLogProbs's distributions.
func (m *Model) Words() []string { return m.Vocab.Words }
