package vsl

import (
	"fmt"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/kit"
)

// Predict tags every sentence of c (tags, if any, are ignored) with the
// classifier on the mean of y, batchSize sentences at a time: per token
// the softmax over the tag set and its most probable tag. It computes on
// an OS thread of its own (kit.OnComputeThread).
func (m *Model) Predict(c *corpus.Corpus, batchSize int) (preds []dataset.Prediction, err error) {
	kit.OnComputeThread(func(func()) {
		var exs []example
		if exs, err = m.encode(c, false); err == nil {
			preds, err = m.predictExamples(exs, batchSize)
		}
	})
	return preds, err
}

func (m *Model) predictExamples(exs []example, batchSize int) ([]dataset.Prediction, error) {
	if batchSize < 1 {
		return nil, fmt.Errorf("batch size %d", batchSize)
	}
	out := make([]dataset.Prediction, len(exs))
	for i := range out {
		out[i] = dataset.Prediction{Tags: []string{}, Probs: [][]float32{}} // empty sentences keep these
	}
	k := m.Labels.NumTags()
	var err error
	kit.NoGrad(func() {
		for _, ids := range batches(exs, batchSize, nil) {
			b := newBatch(exs, ids)
			g := kit.NewGraph(m.device)
			err = kit.Guard(func() {
				l := m.infer(g, b, false, nil)
				probs := kit.Float32s(g.T(m.cls.apply(g, l.y.mu).Softmax(1, gotch.Float, false)))
				for i, id := range b.ids {
					n := exs[id].len()
					p := dataset.Prediction{Tags: make([]string, n), Probs: make([][]float32, n)}
					for t := range n {
						pos := b.pos(i, t)
						row := append([]float32(nil), probs[pos*k:(pos+1)*k]...)
						p.Probs[t], p.Tags[t] = row, m.Labels.Tags[argmax(row)]
					}
					out[id] = p
				}
			})
			g.Free()
			if err != nil {
				err = fmt.Errorf("predicting: %w", err)
				return
			}
		}
	})
	return out, err
}

func argmax(xs []float32) int {
	arg := 0
	for i, x := range xs {
		if x > xs[arg] {
			arg = i
		}
	}
	return arg
}
