package train

import (
	"fmt"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/dataset"
)

// Prediction is a tagger's output for one sentence (see package dataset
// for its file format).
type Prediction = dataset.Prediction

// Predict tags every sentence of c (tags, if any, are ignored), batchSize
// sentences at a time, on an OS thread of its own (see onComputeThread).
func (m *Tagger) Predict(c *corpus.Corpus, batchSize int) (preds []Prediction, err error) {
	onComputeThread(func(func()) {
		var exs []example
		if exs, err = m.encodeCorpus(c, false); err == nil {
			preds, err = m.predictExamples(exs, batchSize)
		}
	})
	return preds, err
}

// predictExamples runs the tagger over encoded examples; the caller holds
// the OS thread.
func (m *Tagger) predictExamples(exs []example, batchSize int) ([]Prediction, error) {
	if batchSize < 1 {
		return nil, fmt.Errorf("batch size %d", batchSize)
	}
	out := make([]Prediction, len(exs))
	if err := m.predictBatches(exs, lengthBatches(exs, batchSize), out); err != nil {
		return nil, err
	}
	for i := range out {
		if out[i].Tags == nil { // empty sentences
			out[i] = Prediction{Tags: []string{}, Probs: [][]float32{}}
		}
	}
	return out, nil
}

// predictBatches predicts the examples of each batch into out.
func (m *Tagger) predictBatches(exs []example, batches [][]int, out []Prediction) error {
	k := m.Labels.NumTags()
	helper, restoreThreads := m.lstmHelperFor(len(batches))
	defer restoreThreads()
	for _, ids := range batches {
		b := newBatch(exs, ids)
		g := newGraph(m.device)
		g.lstmHelper = helper
		err := run(func() {
			noGrad(func() {
				probs, paths := m.head.probabilities(g, m.forward(g, b, false, nil), b, m.Labels.NumTags())
				for i, id := range b.ids {
					rows := sentenceRows(probs, b, i, k)
					p := Prediction{Tags: make([]string, len(rows)), Probs: make([][]float32, len(rows))}
					for t, row := range rows {
						p.Probs[t] = append([]float32(nil), row...)
						tag := argmax(row)
						if paths != nil {
							tag = paths[i][t]
						}
						p.Tags[t] = m.Labels.Tags[tag]
					}
					out[id] = p
				}
			})
		})
		g.free()
		if err != nil {
			return fmt.Errorf("predicting: %w", err)
		}
	}
	return nil
}
