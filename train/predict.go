package train

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"

	"github.com/nerflow/nerflow/corpus"
)

// Prediction is a tagger's output for one sentence.
type Prediction struct {
	// Tags are the best tags: the Viterbi path of a CRF, the most probable
	// tag of each token for the token head.
	Tags []string `json:"tags"`
	// Probs holds each token's distribution over the tag set (the CRF's
	// marginals), in the order of Labels.Tags.
	Probs [][]float32 `json:"probs"`
}

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
				probs, paths := m.probabilities(g, m.forward(g, b, false, nil), b)
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

// PredictionsFile is the name of the predictions file in a predictions
// artifact.
const PredictionsFile = "predictions.jsonl"

// predictionsHeader is the first line of a predictions file.
type predictionsHeader struct {
	Scheme string   `json:"scheme"`
	Labels []string `json:"labels"`
}

// WritePredictions writes predictions as JSON lines: a header naming the
// scheme and the tag set (the order of every Probs row), then one
// Prediction per sentence.
func WritePredictions(w io.Writer, labels *Labels, preds []Prediction) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	if err := enc.Encode(predictionsHeader{Scheme: labels.Scheme.String(), Labels: labels.Tags}); err != nil {
		return err
	}
	for _, p := range preds {
		if err := enc.Encode(p); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// ReadPredictions reads what WritePredictions wrote; it returns the tag set
// and the predictions, checked for consistency. Errors name the file (name)
// and line.
func ReadPredictions(r io.Reader, name string) (labels []string, preds []Prediction, err error) {
	br := bufio.NewReader(r)
	var h predictionsHeader
	for line := 1; ; line++ {
		text, err := br.ReadBytes('\n')
		if len(text) == 0 && errors.Is(err, io.EOF) {
			if line == 1 {
				return nil, nil, fmt.Errorf("%s: empty file, want a header line", name)
			}
			return h.Labels, preds, nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		if line == 1 {
			if err := json.Unmarshal(text, &h); err != nil {
				return nil, nil, fmt.Errorf("%s:1: header: %w", name, err)
			}
			if len(h.Labels) == 0 {
				return nil, nil, fmt.Errorf("%s:1: header has no labels", name)
			}
			continue
		}
		var p Prediction
		if err := json.Unmarshal(text, &p); err != nil {
			return nil, nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		if len(p.Probs) != len(p.Tags) {
			return nil, nil, fmt.Errorf("%s:%d: %d tags but %d probability rows", name, line, len(p.Tags), len(p.Probs))
		}
		for t, row := range p.Probs {
			if len(row) != len(h.Labels) {
				return nil, nil, fmt.Errorf("%s:%d: token %d has %d probabilities for %d labels", name, line, t+1, len(row), len(h.Labels))
			}
		}
		preds = append(preds, p)
	}
}
