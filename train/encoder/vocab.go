package encoder

import (
	"cmp"
	"slices"
)

// Reserved word ids. The vocabulary is case-sensitive: the masked-LM head
// predicts surface forms ("Paris" and "paris" do not stand in the same
// places), and the character CNN sees the spelling anyway.
const (
	// Pad fills the rows of short sentences; never attended to.
	Pad = 0
	// Unknown stands for every word outside the vocabulary as input; as a
	// target it is left out of the loss (predicting it teaches nothing a
	// sampler could use).
	Unknown = 1
	// Mask replaces a word chosen for prediction (80% of them).
	Mask     = 2
	reserved = 3
)

// Reserved character ids.
const (
	padChar  = 0 // fills the character rows of short words (its vector is zero)
	unkChar  = 1 // characters not seen when the vocabulary was built
	maskChar = 2 // the spelling of a masked word: the character CNN must not see the word either
	charsReserved
)

// maxChars cuts long tokens for the character CNN.
const maxChars = 20

// Vocab maps tokens to the encoder's inputs: a word id (the most frequent
// words of the pretraining text) and character ids, so that a word outside
// the vocabulary still gets a representation from its spelling.
type Vocab struct {
	Words []string `json:"words"`
	Chars []string `json:"chars"` // one rune each
	words map[string]int
	chars map[rune]int
}

// NewVocab keeps the maxWords most frequent words of the sentences that
// occur at least minCount times, and every character seen at least
// minCount times (ties broken by value, so the lists do not depend on map
// order).
func NewVocab(sentences [][]string, maxWords, minCount int) *Vocab {
	words, chars := map[string]int{}, map[rune]int{}
	for _, s := range sentences {
		for _, w := range s {
			words[w]++
			for _, r := range w {
				chars[r]++
			}
		}
	}
	v := &Vocab{Words: []string{"<pad>", "<unk>", "<mask>"}, Chars: []string{"", "", ""}}
	ws := frequent(words, minCount)
	if maxWords > 0 && len(ws) > maxWords {
		ws = ws[:maxWords]
	}
	v.Words = append(v.Words, ws...)
	for _, r := range frequent(chars, minCount) {
		v.Chars = append(v.Chars, string(r))
	}
	v.index()
	return v
}

// frequent returns the keys counted at least minCount times, most frequent
// first.
func frequent[K cmp.Ordered](counts map[K]int, minCount int) []K {
	out := make([]K, 0, len(counts))
	for k, n := range counts {
		if n >= minCount {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(a, b K) int {
		if c := cmp.Compare(counts[b], counts[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	return out
}

func (v *Vocab) index() {
	v.words = make(map[string]int, len(v.Words))
	for i, w := range v.Words[reserved:] {
		v.words[w] = i + reserved
	}
	v.chars = make(map[rune]int, len(v.Chars))
	for i, c := range v.Chars[charsReserved:] {
		for _, r := range c {
			v.chars[r] = i + charsReserved
		}
	}
}

// Len is the number of word ids, reserved ones included.
func (v *Vocab) Len() int { return len(v.Words) }

// ID returns a word's id, Unknown when it has none.
func (v *Vocab) ID(word string) int {
	if i, ok := v.words[word]; ok {
		return i
	}
	return Unknown
}

// charIDs returns the ids of a token's first maxChars characters (the
// unknown character alone for an empty token).
func (v *Vocab) charIDs(token string) []int64 {
	var cs []int64
	for _, r := range token {
		if len(cs) == maxChars {
			break
		}
		id, ok := v.chars[r]
		if !ok {
			id = unkChar
		}
		cs = append(cs, int64(id))
	}
	if len(cs) == 0 {
		cs = []int64{unkChar}
	}
	return cs
}
