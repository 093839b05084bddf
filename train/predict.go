package train

import (
	"fmt"
	"runtime"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/dataset"
)

// Prediction is a tagger's output for one sentence (see package dataset
// for its file format).
type Prediction = dataset.Prediction

// Predict tags every sentence of c (tags, if any, are ignored), batchSize
// sentences at a time. It locks the calling goroutine to its OS thread
// while it computes.
func (m *Tagger) Predict(c *corpus.Corpus, batchSize int) ([]Prediction, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	_, doneThreads := computeThreads()
	defer doneThreads()
	exs, err := m.encodeCorpus(c, false)
	if err != nil {
		return nil, err
	}
	return m.predictExamples(exs, batchSize)
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
	for _, ids := range batches {
		b := newBatch(exs, ids)
		g := newGraph(m.device)
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
