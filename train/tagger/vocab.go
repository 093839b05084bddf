package tagger

import (
	"cmp"
	"slices"
	"unicode"
	"unicode/utf8"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/embeddings"
	"github.com/nerflow/nerflow/kit"
)

// Reserved ids.
const (
	unkWord = 0           // every word without a vector of its own
	padChar = kit.PadChar // fills the character rows of short words
	unkChar = 1           // characters not seen in training
)

// Vocab maps tokens to the tagger's inputs: a word id, character ids and a
// casing class.
//
// Word ids follow the lookup policy of package embeddings: a token's
// lower-case Key is looked up first, then its digit Shape; anything else is
// the unknown word. Words (ids 0..len(Words)-1) are the rows the tagger
// trains: the unknown word, then 1..Pretrained, the pretrained words that
// occur in the training corpus (they start from their pretrained vectors),
// then training words that have none and start random. Every other word of
// the pretrained table keeps its vector frozen: its id is len(Words) plus
// its index in the table (see Frozen), so that a word first met at
// prediction still gets its pretrained vector.
type Vocab struct {
	Words      []string `json:"words"`
	Pretrained int      `json:"pretrained"`
	Chars      []string `json:"chars"` // one rune each; Chars[0] and Chars[1] are the pad and unknown markers
	words      map[string]int
	chars      map[rune]int
	frozen     *embeddings.Table
}

// VocabOption adjusts NewVocab.
type VocabOption func(*vocabConfig)

type vocabConfig struct {
	minCount int
}

// MinWordCount is how often a training word without a pretrained vector must
// occur to get a vector of its own (default 2): rarer words stay unknown, so
// that the unknown vector is trained on words the tagger has not seen.
func MinWordCount(n int) VocabOption { return func(c *vocabConfig) { c.minCount = n } }

// NewVocab builds the vocabulary of a tagger trained on train with the
// pretrained vectors table (nil for none), which the vocabulary keeps as its
// frozen table.
func NewVocab(train *corpus.Corpus, table *embeddings.Table, opts ...VocabOption) *Vocab {
	cfg := vocabConfig{minCount: 2}
	for _, o := range opts {
		o(&cfg)
	}
	v := &Vocab{Words: []string{"<unk>"}, Chars: []string{"<pad>", "<unk>"}, frozen: table}

	// Pretrained words met in training, in the table's order.
	met := map[int]bool{}
	wordCounts := map[string]int{}
	charCounts := map[rune]int{}
	for _, s := range train.Sentences {
		for _, tok := range s.Tokens {
			if i, ok := v.lookupTable(tok); ok {
				met[i] = true
			} else {
				wordCounts[embeddings.Shape(tok)]++
			}
			for _, r := range tok {
				charCounts[r]++
			}
		}
	}
	rows := make([]int, 0, len(met))
	for i := range met {
		rows = append(rows, i)
	}
	slices.Sort(rows)
	for _, i := range rows {
		v.Words = append(v.Words, table.Words[i])
	}
	v.Pretrained = len(rows)
	for _, w := range sortedByCount(wordCounts) {
		if wordCounts[w] >= cfg.minCount {
			v.Words = append(v.Words, w)
		}
	}
	for _, r := range sortedByCount(charCounts) {
		v.Chars = append(v.Chars, string(r))
	}
	v.index()
	return v
}

// lookupTable finds token in the frozen table by Key, then by Shape.
func (v *Vocab) lookupTable(token string) (int, bool) {
	if v.frozen == nil {
		return 0, false
	}
	if i, ok := v.frozen.Lookup(token); ok {
		return i, true
	}
	return v.frozen.Lookup(embeddings.Shape(token))
}

// Frozen is the pretrained table whose vectors the tagger uses unchanged for
// the words outside Words (nil: none, as in taggers trained without vectors
// or saved before format 2).
func (v *Vocab) Frozen() *embeddings.Table { return v.frozen }

// IsFrozen tells whether word id i is a row of the frozen table.
func (v *Vocab) IsFrozen(i int) bool { return i >= len(v.Words) }

// sortedByCount orders keys by decreasing count, ties by key, so that a
// vocabulary does not depend on map order.
func sortedByCount[K cmp.Ordered](counts map[K]int) []K {
	keys := make([]K, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b K) int {
		if c := cmp.Compare(counts[b], counts[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	return keys
}

// Restore prepares a vocabulary decoded from JSON for lookups, with its
// frozen table (nil for none): what a model saved with a vocabulary calls
// when it loads.
func (v *Vocab) Restore(table *embeddings.Table) {
	v.frozen = table
	v.index()
}

// index rebuilds the lookup maps (after NewVocab or decoding).
func (v *Vocab) index() {
	v.words = make(map[string]int, len(v.Words))
	for i, w := range v.Words {
		v.words[w] = i
	}
	v.chars = make(map[rune]int, len(v.Chars))
	for i, c := range v.Chars[2:] {
		r, _ := utf8.DecodeRuneInString(c)
		v.chars[r] = i + 2
	}
}

// Word returns the word id of a token: its lower-case Key, then its digit
// Shape, each looked up among the trained rows and then in the frozen table;
// else the unknown word.
func (v *Vocab) Word(token string) int {
	for _, key := range []string{embeddings.Key(token), embeddings.Shape(token)} {
		if i, ok := v.words[key]; ok && i > 0 {
			return i
		}
		if v.frozen != nil {
			if i, ok := v.frozen.Lookup(key); ok {
				return len(v.Words) + i
			}
		}
	}
	return unkWord
}

// Known tells whether a token has a vector of its own (trained or frozen)
// rather than the unknown word's.
func (v *Vocab) Known(token string) bool { return v.Word(token) != unkWord }

// Char returns the id of a character.
func (v *Vocab) Char(r rune) int {
	if i, ok := v.chars[r]; ok {
		return i
	}
	return unkChar
}

// CharIDs returns the ids of a token's first maxLen characters (the
// unknown character alone for an empty token).
func (v *Vocab) CharIDs(token string, maxLen int) []int64 {
	var cs []int64
	for _, r := range token {
		if len(cs) == maxLen {
			break
		}
		cs = append(cs, int64(v.Char(r)))
	}
	if len(cs) == 0 {
		cs = []int64{unkChar}
	}
	return cs
}

// Casing classes: what the lower-case word vectors cannot see.
const (
	caseLower = iota
	caseUpper
	caseTitle
	caseMixed
	caseNumeric       // digits only
	caseMostlyNumeric // more than half digits
	caseHasDigit
	casePunct // no letter, no digit
	numCasings
)

// casing classifies a token by the case of its letters and its digits.
func casing(token string) int {
	var letters, uppers, digits, n int
	firstUpper := false
	for i, r := range []rune(token) {
		n++
		switch {
		case unicode.IsDigit(r):
			digits++
		case unicode.IsLetter(r):
			letters++
			if unicode.IsUpper(r) {
				uppers++
				if i == 0 {
					firstUpper = true
				}
			}
		}
	}
	switch {
	case digits == n:
		return caseNumeric
	case 2*digits > n:
		return caseMostlyNumeric
	case digits > 0:
		return caseHasDigit
	case letters == 0:
		return casePunct
	case uppers == 0:
		return caseLower
	case uppers == letters:
		return caseUpper
	case firstUpper && uppers == 1:
		return caseTitle
	}
	return caseMixed
}
