package tagger

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/kit"
)

// example is one sentence encoded for the tagger.
type example struct {
	tokens  []string // for a language model's states (TagLM)
	words   []int64
	chars   [][]int64 // per token, at most Config.MaxWordLen
	casing  []int64
	targets []int32 // class, ignored or anyEntity per token; nil when unlabeled
	// soft holds soft targets (LossKL): per token, p(O) then the weights of
	// the entity tags.
	soft [][]float32
	// complete holds the sentence's entities in a complete annotation
	// (WithCompleteAnnotation), to tell which negatives drawn by
	// LossNegSample are in fact entities; nil without one.
	complete []corpus.Span
}

func (e *example) len() int { return len(e.words) }

// encodeCorpus encodes every sentence of c. With labeled, every sentence
// must have tags, which are converted from any scheme (read with
// conlleval's rules) to the tagger's.
func (m *Tagger) encodeCorpus(c *corpus.Corpus, labeled bool) ([]example, error) {
	return corpus.MapSentences(c, func(s corpus.Sentence) (example, error) { return m.encodeSentence(s, labeled) })
}

func (m *Tagger) encodeSentence(s corpus.Sentence, labeled bool) (example, error) {
	n := len(s.Tokens)
	e := example{tokens: s.Tokens, words: make([]int64, n), chars: make([][]int64, n), casing: make([]int64, n)}
	for j, tok := range s.Tokens {
		e.words[j] = int64(m.Vocab.Word(tok))
		e.casing[j] = int64(casing(tok))
		e.chars[j] = m.Vocab.CharIDs(tok, m.Config.MaxWordLen)
	}
	if !labeled {
		return e, nil
	}
	if len(s.Tags) != n {
		return e, fmt.Errorf("%d tokens but %d tags", n, len(s.Tags))
	}
	tags, err := convertTags(s.Tags, m.Labels.Scheme)
	if err != nil {
		return e, err
	}
	if e.targets, err = m.Labels.encode(tags); err != nil {
		return e, err
	}
	return e, nil
}

// convertTags rewrites tags of any scheme into scheme. Converting to IO
// merges adjacent entities of one type, which IO cannot tell apart.
func convertTags(tags []string, scheme corpus.Scheme) ([]string, error) {
	var opts []corpus.ConvertOption
	if scheme == corpus.IO {
		opts = append(opts, corpus.MergeAdjacent())
	}
	return corpus.Convert(tags, corpus.AnyScheme, scheme, opts...)
}

// Batch is a set of sentences in the packed layout of libtorch's RNNs: the
// sentences sorted by decreasing length, and their tokens ordered time step
// by time step, so that step t holds the t-th token of the first
// batchSizes[t] sentences. Every per-token tensor of the model is in this
// order, which needs no padding: token t of sentence b is at offsets[t]+b.
type Batch struct {
	ids        []int   // example indices, by decreasing length
	batchSizes []int64 // sentences still running at each step
	offsets    []int   // packed index of each step's first token
	n          int     // tokens

	words, casing []int64
	chars         kit.CharRows
	tokens        [][]string // per sentence, in ids order
}

// pos is the packed index of token t of the batch's b-th sentence.
func (b *Batch) pos(i, t int) int { return b.offsets[t] + i }

// Tokens is the number of tokens of the batch.
func (b *Batch) Tokens() int { return b.n }

// Sentences is the number of sentences of the batch.
func (b *Batch) Sentences() int { return len(b.ids) }

// Pos is the packed index of token t of the batch's i-th sentence (the
// sentences sorted by decreasing length).
func (b *Batch) Pos(i, t int) int { return b.pos(i, t) }

// Len is the length of the batch's i-th sentence.
func (b *Batch) Len(i int) int { return len(b.tokens[i]) }

// newBatch lays out examples ids (all non-empty) in packed order.
func newBatch(exs []example, ids []int) *Batch {
	b, spellings := packBatch(exs, ids)
	b.chars = kit.NewCharRows(spellings)
	return b
}

// packBatch is newBatch without the characters: it returns each token's
// spelling in packed order instead.
func packBatch(exs []example, ids []int) (*Batch, [][]int64) {
	ids = slices.Clone(ids)
	slices.SortStableFunc(ids, func(a, b int) int { return exs[b].len() - exs[a].len() })
	b := &Batch{ids: ids}
	steps := exs[ids[0]].len()
	for t := range steps {
		k := 0
		for k < len(ids) && exs[ids[k]].len() > t {
			k++
		}
		b.offsets = append(b.offsets, b.n)
		b.batchSizes = append(b.batchSizes, int64(k))
		b.n += k
	}
	b.words = make([]int64, b.n)
	b.casing = make([]int64, b.n)
	spellings := make([][]int64, b.n)
	for i, id := range ids {
		e := &exs[id]
		b.tokens = append(b.tokens, e.tokens)
		for t := range e.len() {
			p := b.pos(i, t)
			b.words[p] = e.words[t]
			b.casing[p] = e.casing[t]
			spellings[p] = e.chars[t]
		}
	}
	return b, spellings
}

// bucketBatches groups the non-empty examples into random batches of
// similar lengths (kit.LengthBatches).
func bucketBatches(exs []example, size int, rng *rand.Rand) [][]int {
	return kit.LengthBatches(len(exs), func(i int) int { return exs[i].len() }, size, rng)
}

// lengthBatches cuts the non-empty examples, sorted by length, into
// batches (for prediction: deterministic, and little wasted work).
func lengthBatches(exs []example, size int) [][]int {
	return kit.LengthBatches(len(exs), func(i int) int { return exs[i].len() }, size, nil)
}
