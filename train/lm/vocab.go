package lm

import (
	"cmp"
	"slices"
)

// Reserved word ids.
const (
	// Unknown stands for every word outside the vocabulary, as input and as
	// a prediction.
	Unknown = 0
	// Boundary is the sentence boundary: the first input of each direction,
	// and its last target (the forward model predicts the end of the
	// sentence, the backward model its start).
	Boundary = 1
	reserved = 2
)

// Vocab is the language models' word list, case-sensitive: the
// augmentation samples surface forms, and "Paris" and "paris" are not
// interchangeable in a sentence.
type Vocab struct {
	Words []string `json:"words"`
	index map[string]int
}

// NewVocab keeps the maxWords most frequent words of the sentences that
// occur at least minCount times (ties broken by the word, so the list does
// not depend on map order).
func NewVocab(sentences [][]string, maxWords, minCount int) *Vocab {
	counts := map[string]int{}
	for _, s := range sentences {
		for _, w := range s {
			counts[w]++
		}
	}
	words := make([]string, 0, len(counts))
	for w, n := range counts {
		if n >= minCount {
			words = append(words, w)
		}
	}
	slices.SortFunc(words, func(a, b string) int {
		if c := cmp.Compare(counts[b], counts[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	if maxWords > 0 && len(words) > maxWords {
		words = words[:maxWords]
	}
	v := &Vocab{Words: append([]string{"<unk>", "<s>"}, words...)}
	v.reindex()
	return v
}

func (v *Vocab) reindex() {
	v.index = make(map[string]int, len(v.Words))
	for i, w := range v.Words[reserved:] {
		v.index[w] = i + reserved
	}
}

// Len is the number of ids, reserved ones included.
func (v *Vocab) Len() int { return len(v.Words) }

// ID returns a word's id, Unknown when it has none.
func (v *Vocab) ID(word string) int {
	if i, ok := v.index[word]; ok {
		return i
	}
	return Unknown
}

// ids encodes a sentence.
func (v *Vocab) ids(words []string) []int64 {
	out := make([]int64, len(words))
	for i, w := range words {
		out[i] = int64(v.ID(w))
	}
	return out
}
