package vsl

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/embeddings"
	"github.com/nerflow/nerflow/kit"
)

// ignored is the target of a token that adds no classification loss: an
// entity of unknown type, and every token of an unlabeled sentence.
const ignored = -1

// example is one sentence encoded for the model.
type example struct {
	tokens  []string  // for a fine-tuned encoder
	words   []int64   // rows of Model.words
	chars   [][]int64 // per token, at most Config.MaxWordLen
	recon   []int64   // reconstruction targets
	targets []int64   // class or ignored per token; nil when unlabeled
}

func (e *example) len() int { return len(e.words) }

// encode encodes the sentences of c; with labeled, their tags (any scheme,
// read with conlleval's rules) become the targets.
func (m *Model) encode(c *corpus.Corpus, labeled bool) ([]example, error) {
	return corpus.MapSentences(c, func(s corpus.Sentence) (example, error) { return m.encodeSentence(s, labeled) })
}

func (m *Model) encodeSentence(s corpus.Sentence, labeled bool) (example, error) {
	n := len(s.Tokens)
	e := example{tokens: s.Tokens, words: make([]int64, n), chars: make([][]int64, n), recon: make([]int64, n)}
	for j, tok := range s.Tokens {
		e.words[j] = m.wordRow(tok)
		e.chars[j] = m.Vocab.CharIDs(tok, m.Config.MaxWordLen)
		e.recon[j] = int64(m.recon[embeddings.Key(tok)]) // 0 when absent: the unknown word
	}
	if !labeled {
		return e, nil
	}
	if len(s.Tags) != n {
		return e, fmt.Errorf("%d tokens but %d tags", n, len(s.Tags))
	}
	classes, err := m.Labels.Classes(s.Tags)
	if err != nil {
		return e, err
	}
	e.targets = make([]int64, n)
	for j, c := range classes {
		e.targets[j] = int64(c) // -1 (unknown type) is ignored
	}
	return e, nil
}

// wordRow is the row of a token's fixed vector: the table's row found by
// the vocabulary's lookup policy (lower-case key, then digit shape), else
// the unknown word's.
func (m *Model) wordRow(tok string) int64 {
	v := m.Vocab
	id := v.Word(tok)
	if v.IsFrozen(id) {
		return int64(id - len(v.Words) + 1)
	}
	if id > 0 && id <= v.Pretrained {
		if i, ok := v.Frozen().Lookup(v.Words[id]); ok {
			return int64(i + 1)
		}
	}
	return 0
}

// ReconVocab returns the n most frequent word keys of the corpora, ties
// broken by the key: the reconstruction vocabulary.
func ReconVocab(n int, cs ...*corpus.Corpus) []string {
	counts := map[string]int{}
	for _, c := range cs {
		if c == nil {
			continue
		}
		for _, s := range c.Sentences {
			for _, tok := range s.Tokens {
				counts[embeddings.Key(tok)]++
			}
		}
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if counts[a] != counts[b] {
			return counts[b] - counts[a]
		}
		if a < b {
			return -1
		}
		return 1
	})
	return keys[:min(n, len(keys))]
}

// batch is sentences in the packed layout of libtorch's RNNs: sorted by
// decreasing length, tokens time step by time step, so that token t of the
// i-th sentence is at offsets[t]+i.
type batch struct {
	ids        []int
	batchSizes []int64
	offsets    []int
	n          int

	words, recon []int64
	targets      []int64 // ignored for unlabeled sentences
	labeled      int     // tokens with a class target
	chars        kit.CharRows
	tokens       [][]string // per sentence, in ids order
}

func (b *batch) pos(i, t int) int { return b.offsets[t] + i }

func newBatch(exs []example, ids []int) *batch {
	ids = slices.Clone(ids)
	slices.SortStableFunc(ids, func(a, b int) int { return exs[b].len() - exs[a].len() })
	b := &batch{ids: ids}
	for t := range exs[ids[0]].len() {
		k := 0
		for k < len(ids) && exs[ids[k]].len() > t {
			k++
		}
		b.offsets = append(b.offsets, b.n)
		b.batchSizes = append(b.batchSizes, int64(k))
		b.n += k
	}
	b.words, b.recon, b.targets = make([]int64, b.n), make([]int64, b.n), make([]int64, b.n)
	rows := make([][]int64, b.n)
	for i, id := range ids {
		e := &exs[id]
		b.tokens = append(b.tokens, e.tokens)
		for t := range e.len() {
			p := b.pos(i, t)
			b.words[p], b.recon[p], rows[p] = e.words[t], e.recon[t], e.chars[t]
			b.targets[p] = ignored
			if e.targets != nil {
				b.targets[p] = e.targets[t]
			}
			if b.targets[p] != ignored {
				b.labeled++
			}
		}
	}
	b.chars = kit.NewCharRows(rows)
	return b
}

// batches cuts the non-empty examples into batches of similar lengths
// (kit.LengthBatches); with rng nil, in length order (prediction).
func batches(exs []example, size int, rng *rand.Rand) [][]int {
	return kit.LengthBatches(len(exs), func(i int) int { return exs[i].len() }, size, rng)
}
