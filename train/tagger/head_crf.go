package tagger

import (
	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/kit"
)

// CRFHead is a linear-chain CRF over linear emission scores, decoded with
// Viterbi.
const CRFHead = "crf"

func init() { RegisterHead(CRFHead, crfHead{}) }

type crfHead struct{}

func (crfHead) Doc() string { return "linear-chain CRF over linear emission scores, Viterbi decoding" }

func (crfHead) NewWeights(p *kit.Initializer, in int, labels *Labels, _ Config) HeadWeights {
	k := labels.NumTags()
	out := 1 / sqrt(in)
	return &crfWeightsOf{
		emitW: p.Uniform("emit_w", out, k, in), emitB: p.Uniform("emit_b", out, k),
		trans: p.Uniform("crf_trans", 0.1, k, k), start: p.Uniform("crf_start", 0.1, k), end: p.Uniform("crf_end", 0.1, k),
	}
}

// crfWeightsOf are the CRF head's weights.
type crfWeightsOf struct {
	emitW, emitB, trans, start, end *ts.Tensor
}

func (w *crfWeightsOf) emissions(g *kit.Graph, h *ts.Tensor) *ts.Tensor {
	return g.T(ts.Linear(h, w.emitW, w.emitB))
}

// host copies the transition scores to Go memory for decoding.
func (w *crfWeightsOf) host(k int) *crfWeights {
	return &crfWeights{k: k, trans: kit.Float32s(w.trans), start: kit.Float32s(w.start), end: kit.Float32s(w.end)}
}

// probabilities are the CRF's marginals, with its Viterbi paths.
func (w *crfWeightsOf) Probabilities(g *kit.Graph, h *ts.Tensor, b *Batch, k int) (probs []float32, paths [][]int) {
	em := kit.Float32s(w.emissions(g, h))
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
