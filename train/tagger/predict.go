package tagger

import (
	"fmt"
	"slices"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/kit"
	"github.com/sugarme/gotch/ts"
)

// Prediction is a tagger's output for one sentence (see package dataset
// for its file format).
type Prediction = dataset.Prediction

// Predict tags every sentence of c (tags, if any, are ignored), batchSize
// sentences at a time, on an OS thread of its own (see onComputeThread).
// A tagger with an overlay combines the overlay's entities with its own
// (see SetOverlay).
func (m *Tagger) Predict(c *corpus.Corpus, batchSize int) (preds []Prediction, err error) {
	kit.OnComputeThread(func(func()) {
		var exs []example
		if exs, err = m.encodeCorpus(c, false); err == nil {
			preds, err = m.predictExamples(exs, batchSize)
		}
	})
	if err == nil {
		err = m.applyOverlay(c, preds)
	}
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
	err := m.inference(exs, batches, func(g *kit.Graph, b *Batch, h *ts.Tensor) {
		probs, paths := m.head.Probabilities(g, h, b, k)
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
	if err != nil {
		return fmt.Errorf("predicting: %w", err)
	}
	return nil
}

// inference runs the encoder over batches of exs (non-empty examples) with
// gradients off and hands f each batch's hidden states, [tokens, 2*Hidden]
// in packed order, on a graph freed after f. As the weights stay fixed for
// the whole pass, the character features of each distinct spelling are
// computed once for it (charTable), and the BiLSTM's directions run apart
// where the threads allow (lstm_apart.go).
func (m *Tagger) inference(exs []example, batches [][]int, f func(g *kit.Graph, b *Batch, h *ts.Tensor)) error {
	helper, restoreThreads := kit.LSTMHelperFor(m.device, len(batches))
	defer restoreThreads()
	tableGraph := kit.NewGraph(m.device)
	defer tableGraph.Free()
	var table charTable
	words := !m.Config.replaced() // else no character CNN: the encoder reads the words
	if words {
		err := kit.Guard(func() {
			kit.NoGrad(func() { table = m.newCharTable(tableGraph, exs, batches, charTableChunk) })
		})
		if err != nil {
			return fmt.Errorf("character features: %w", err)
		}
	}
	for _, ids := range batches {
		b, _ := packBatch(exs, ids)
		if words {
			b.chars = table.rows(b)
		}
		g := kit.NewGraph(m.device)
		g.LSTMHelper = helper
		err := kit.Guard(func() {
			kit.NoGrad(func() { f(g, b, m.forward(g, b, false, nil)) })
		})
		g.Free()
		if err != nil {
			return err
		}
	}
	return nil
}

// charTable holds the character features of every distinct spelling in a
// pass over examples with fixed weights. CoNLL-2003's training set spells
// its 203,621 tokens 23,623 ways, and noisy-label removal predicts all of it
// several times an epoch; a batch of 32 sentences alone repeats about 40%
// of its spellings.
type charTable struct {
	rowOf    [][]int64  // per example, each token's row (nil for examples outside the pass)
	features *ts.Tensor // [spellings, F], owned by the graph given to newCharTable
}

// charTableChunk is how many spellings the character CNN takes at once
// (their feature maps: chunk × filters × longest spelling floats).
const charTableChunk = 2048

func (m *Tagger) newCharTable(g *kit.Graph, exs []example, batches [][]int, chunk int) charTable {
	var tokens [][]int64
	for _, ids := range batches {
		for _, id := range ids {
			tokens = append(tokens, exs[id].chars...)
		}
	}
	spellings, of := kit.DistinctSpellings(tokens)
	// Rows by length, so that a chunk's rows pad little.
	order := make([]int, len(spellings))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return len(spellings[a]) - len(spellings[b]) })
	rowOfSpelling := make([]int64, len(spellings))
	sorted := make([][]int64, len(spellings))
	for row, i := range order {
		rowOfSpelling[i], sorted[row] = int64(row), spellings[i]
	}
	// of becomes each token's row, and each example's rows a piece of it.
	t := charTable{rowOf: make([][]int64, len(exs))}
	for p := range of {
		of[p] = rowOfSpelling[of[p]]
	}
	p := 0
	for _, ids := range batches {
		for _, id := range ids {
			n := exs[id].len()
			t.rowOf[id] = of[p : p+n : p+n]
			p += n
		}
	}
	var chunks []*ts.Tensor
	for lo := 0; lo < len(sorted); lo += chunk {
		// A graph per chunk frees its feature maps before the next one.
		func() {
			cg := kit.NewGraph(m.device)
			defer cg.Free()
			feat := cg.CharCNN(m.charEmb, m.convW, m.convB, kit.PadSpellings(sorted[lo:min(lo+chunk, len(sorted))]))
			chunks = append(chunks, g.T(feat.ShallowClone()))
		}()
	}
	if len(chunks) == 1 {
		t.features = chunks[0]
	} else {
		t.features = g.T(ts.Cat(chunks, 0))
	}
	return t
}

// rows lays out batch b's tokens as rows of the table.
func (t charTable) rows(b *Batch) kit.CharRows {
	of := make([]int64, b.n)
	for i, id := range b.ids {
		for tok, row := range t.rowOf[id] {
			of[b.pos(i, tok)] = row
		}
	}
	return kit.CharRows{Of: of, Features: t.features}
}
