package train

import "github.com/sugarme/gotch/ts"

// CRFHead is a linear-chain CRF over linear emission scores, decoded with
// Viterbi.
const CRFHead = "crf"

func init() { RegisterHead(CRFHead, crfHead{}) }

type crfHead struct{}

func (crfHead) Doc() string { return "linear-chain CRF over linear emission scores, Viterbi decoding" }

func (crfHead) newWeights(p *initializer, in int, labels *Labels, _ Config) headWeights {
	k := labels.NumTags()
	out := 1 / sqrt(in)
	return &crfWeightsOf{
		emitW: p.uniform("emit_w", out, k, in), emitB: p.uniform("emit_b", out, k),
		trans: p.uniform("crf_trans", 0.1, k, k), start: p.uniform("crf_start", 0.1, k), end: p.uniform("crf_end", 0.1, k),
	}
}

// crfWeightsOf are the CRF head's weights.
type crfWeightsOf struct {
	emitW, emitB, trans, start, end *ts.Tensor
}

func (w *crfWeightsOf) emissions(g *graph, h *ts.Tensor) *ts.Tensor {
	return g.t(ts.Linear(h, w.emitW, w.emitB))
}

// host copies the transition scores to Go memory for decoding.
func (w *crfWeightsOf) host(k int) *crfWeights {
	return &crfWeights{k: k, trans: float32s(w.trans), start: float32s(w.start), end: float32s(w.end)}
}

// probabilities are the CRF's marginals, with its Viterbi paths.
func (w *crfWeightsOf) probabilities(g *graph, h *ts.Tensor, b *batch, k int) (probs []float32, paths [][]int) {
	em := float32s(w.emissions(g, h))
	crf := w.host(k)
	probs = make([]float32, b.n*k)
	for i := range b.ids {
		rows := sentenceRows(em, b, i, k)
		paths = append(paths, crf.viterbi(rows))
		for t, row := range crf.marginals(rows) {
			copy(probs[b.pos(i, t)*k:], row)
		}
	}
	return probs, paths
}
