package lm

import (
	"fmt"
	"math"

	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/kit"
)

// Masked asks for the word at one position of one sentence.
type Masked struct {
	Sentence int // index in the sentences given
	Position int // 0-based token index
}

// MaskedLogProbs returns, for each query, the log-probabilities over the
// vocabulary of the word at the position given every other word of its
// sentence (see Combine): the forward model reads the words to its left,
// the backward model those to its right. The words at other masked
// positions of the same sentence stay as they are. It locks the calling
// goroutine to its OS thread.
func (m *Model) MaskedLogProbs(sentences [][]string, queries []Masked, batchSize int) ([][]float64, error) {
	out := make([][]float64, len(queries))
	v := int64(m.Vocab.Len())
	err := m.maskedScores(sentences, queries, batchSize, func(g *kit.Graph, asked []int, logp [2]*ts.Tensor) {
		fwd, bwd := kit.Float32s(logp[Forward]), kit.Float32s(logp[Backward])
		for k, qi := range asked {
			out[qi] = Combine(fwd[int64(k)*v:int64(k+1)*v], bwd[int64(k)*v:int64(k+1)*v])
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Candidate is a word of a masked position's k most likely, by its id in
// Words, and its log-probability up to a constant shared by the
// candidates of the same position.
type Candidate struct {
	ID    int
	Score float64
}

// MaskedTopK returns, for each query, the k most likely words of
// MaskedLogProbs's distribution, best first: ranked on the models' device,
// so that only k words per position reach the host, not the vocabulary's
// distribution (what a sampler of the top k needs). The scores are the
// two directions' summed log-probabilities, Combine's before its
// renormalization. It locks the calling goroutine to its OS thread.
func (m *Model) MaskedTopK(sentences [][]string, queries []Masked, k, batchSize int) ([][]Candidate, error) {
	out := make([][]Candidate, len(queries))
	err := m.maskedScores(sentences, queries, batchSize, func(g *kit.Graph, asked []int, logp [2]*ts.Tensor) {
		ids, vals := g.TopK(g.T(logp[Forward].Add(logp[Backward], false)), reserved, k)
		SetTopK(out, asked, ids, vals, k)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SetTopK stores a batch's top k (kit.Graph.TopK's ids and scores, k per
// row) as the candidates of the queries its rows answer: row j is query
// rows[j].
func SetTopK(out [][]Candidate, rows []int, ids []int64, scores []float32, k int) {
	for j, qi := range rows {
		c := make([]Candidate, k)
		for i := range c {
			c[i] = Candidate{ID: int(ids[j*k+i]), Score: float64(scores[j*k+i])}
		}
		out[qi] = c
	}
}

// maskedScores runs both directions over the sentences of the queries,
// batchSize sentences at a time, and hands f each batch's queries (their
// indices) with the two directions' log-probabilities of their words,
// [len(asked), vocabulary] each, in the batch's graph.
func (m *Model) maskedScores(sentences [][]string, queries []Masked, batchSize int, f func(g *kit.Graph, asked []int, logp [2]*ts.Tensor)) error {
	bySentence := map[int][]int{}
	for qi, q := range queries {
		if q.Sentence < 0 || q.Sentence >= len(sentences) || q.Position < 0 || q.Position >= len(sentences[q.Sentence]) {
			return fmt.Errorf("masked word %d: sentence %d position %d is outside the text", qi, q.Sentence, q.Position)
		}
		bySentence[q.Sentence] = append(bySentence[q.Sentence], qi)
	}
	for start := 0; start < len(sentences); start += batchSize {
		end := min(start+batchSize, len(sentences))
		// Rows of the states (valid positions, row by row) each query reads.
		var rows [2][]int64
		var asked []int
		offset := int64(0)
		for i := start; i < end; i++ {
			n := len(sentences[i])
			for _, qi := range bySentence[i] {
				t := queries[qi].Position
				// Forward position t has read w[0..t-1]; backward position
				// n-1-t has read w[n-1..t+1].
				rows[Forward] = append(rows[Forward], offset+int64(t))
				rows[Backward] = append(rows[Backward], offset+int64(n-1-t))
				asked = append(asked, qi)
			}
			if n > 0 {
				offset += int64(n + 1)
			}
		}
		if len(asked) == 0 {
			continue
		}
		err := m.eachBatch(sentences[start:end], end-start, func(g *kit.Graph, b *batch) {
			var logp [2]*ts.Tensor
			for d := range 2 {
				h := m.states(g, b, d, false, nil)
				h = g.T(h.IndexSelect(0, g.Ints(rows[d], int64(len(rows[d]))), false))
				logp[d] = m.logProbs(g, h)
			}
			f(g, asked, logp)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// Words is the vocabulary, indexed like MaskedLogProbs's distributions.
func (m *Model) Words() []string { return m.Vocab.Words }

// Combine is the masked-word distribution from the two directions' log
// probabilities of one position: a product of experts,
//
//	p(w | left, right) ∝ p_fwd(w | left) · p_bwd(w | right),
//
// renormalized over the words of the vocabulary. The reserved ids (the
// unknown word, the boundary) get probability 0: they cannot stand in a
// sentence. The result holds log-probabilities (-Inf for the reserved ids).
func Combine(fwd, bwd []float32) []float64 {
	out := make([]float64, len(fwd))
	maxv := math.Inf(-1)
	for i := range out {
		if i < reserved {
			out[i] = math.Inf(-1)
			continue
		}
		out[i] = float64(fwd[i]) + float64(bwd[i])
		maxv = max(maxv, out[i])
	}
	var z float64
	for _, x := range out[reserved:] {
		z += math.Exp(x - maxv)
	}
	logZ := maxv + math.Log(z)
	for i := reserved; i < len(out); i++ {
		out[i] -= logZ
	}
	return out
}

// States returns the top-layer states of both models at every token of the
// sentences, [sentence][token][Hidden]: the forward state of token t has
// read the words up to t, the backward state the words from the end down
// to t (TagLM's language-model embeddings). It locks the calling goroutine
// to its OS thread.
func (m *Model) States(sentences [][]string, batchSize int) (fwd, bwd [][][]float32, err error) {
	fwd, bwd = make([][][]float32, len(sentences)), make([][][]float32, len(sentences))
	h := m.Config.Hidden
	next := 0 // first sentence of the batch
	err = m.eachBatch(sentences, batchSize, func(g *kit.Graph, b *batch) {
		var states [2][]float32
		for d := range 2 {
			states[d] = kit.Float32s(m.states(g, b, d, false, nil))
		}
		row := 0
		for _, n := range b.lens {
			for len(sentences[next]) == 0 {
				next++
			}
			f, bw := make([][]float32, n), make([][]float32, n)
			for t := range n {
				// Forward position t+1 has read w[0..t]; backward position
				// n-t has read w[n-1..t].
				f[t] = states[Forward][(row+t+1)*h : (row+t+2)*h]
				bw[t] = states[Backward][(row+n-t)*h : (row+n-t+1)*h]
			}
			fwd[next], bwd[next] = f, bw
			row += n + 1
			next++
		}
	})
	for i, s := range sentences {
		if len(s) == 0 {
			fwd[i], bwd[i] = [][]float32{}, [][]float32{}
		}
	}
	return fwd, bwd, err
}
