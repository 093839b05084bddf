package encoder

import (
	"math"
	"math/rand/v2"
)

// Masking is the masked-LM corruption (RoBERTa's): about Rate of each
// sentence's tokens are chosen for prediction; of those, MaskProb are
// replaced by the mask token, RandomProb by a word drawn uniformly from the
// vocabulary, and the rest kept as they are.
type Masking struct {
	Rate       float64 `json:"rate"`
	MaskProb   float64 `json:"mask_prob"`
	RandomProb float64 `json:"random_prob"`
}

// DefaultMasking is BERT's and RoBERTa's: 15% of tokens; 80% masked, 10%
// random, 10% kept.
func DefaultMasking() Masking { return Masking{Rate: 0.15, MaskProb: 0.8, RandomProb: 0.1} }

// How a chosen token is corrupted.
const (
	keptToken = iota
	maskedToken
	randomToken
)

// maskedSentence is one sentence's encoder input after corruption, and
// what the model must predict.
type maskedSentence struct {
	ids       []int64   // word ids read
	spellings [][]int64 // character ids read
	chosen    []int     // positions chosen for prediction, increasing
	how       []int     // per chosen position: keptToken, maskedToken or randomToken
	targets   []int64   // per chosen position: the original word's id
}

// mask corrupts a sentence. The number of chosen positions is Rate times
// the length rounded up or down at random (fairseq's rounding, so that the
// expected proportion is Rate at every length); the positions are drawn
// without replacement. With rng nil nothing is chosen.
func (v *Vocab) mask(words []string, mk Masking, rng *rand.Rand) maskedSentence {
	s := maskedSentence{ids: make([]int64, len(words)), spellings: make([][]int64, len(words))}
	for i, w := range words {
		s.ids[i] = int64(v.ID(w))
		s.spellings[i] = v.charIDs(w)
	}
	if rng == nil || len(words) == 0 {
		return s
	}
	k := int(math.Floor(mk.Rate*float64(len(words)) + rng.Float64()))
	k = min(k, len(words))
	if k == 0 {
		return s
	}
	chosen := make([]bool, len(words))
	for _, p := range rng.Perm(len(words))[:k] {
		chosen[p] = true
	}
	for p, yes := range chosen {
		if !yes {
			continue
		}
		s.chosen = append(s.chosen, p)
		s.targets = append(s.targets, s.ids[p])
		u := rng.Float64()
		switch {
		case u < mk.MaskProb:
			s.ids[p], s.spellings[p] = Mask, []int64{maskChar}
			s.how = append(s.how, maskedToken)
		case u < mk.MaskProb+mk.RandomProb:
			r := reserved + rng.IntN(v.Len()-reserved)
			s.ids[p], s.spellings[p] = int64(r), v.charIDs(v.Words[r])
			s.how = append(s.how, randomToken)
		default:
			s.how = append(s.how, keptToken)
		}
	}
	return s
}

// batch is sentences laid out for the encoder: n rows of t positions,
// padded at the end.
type batch struct {
	n, t      int64
	lens      []int
	ids       []int64   // [n*t] word ids read, Pad after each sentence
	spellings [][]int64 // character ids of the real tokens, row by row
	charRow   []int64   // [n*t]: 1 + the position's index in spellings, 0 for padding
	predict   []int64   // flat positions (row*t + j) scored by the loss
	targets   []int64   // their words
	tokens    int       // real tokens
}

// newBatch lays out corrupted sentences. A position whose original word
// is unknown is read as corrupted but not scored.
func newBatch(sents []maskedSentence) *batch {
	b := &batch{n: int64(len(sents))}
	for _, s := range sents {
		b.t = max(b.t, int64(len(s.ids)))
		b.lens = append(b.lens, len(s.ids))
	}
	b.ids = make([]int64, b.n*b.t)
	b.charRow = make([]int64, b.n*b.t)
	for i, s := range sents {
		row := int64(i) * b.t
		for j, id := range s.ids {
			b.ids[row+int64(j)] = id
			b.spellings = append(b.spellings, s.spellings[j])
			b.charRow[row+int64(j)] = int64(len(b.spellings))
		}
		b.tokens += len(s.ids)
		for c, p := range s.chosen {
			if s.targets[c] == Unknown {
				continue
			}
			b.predict = append(b.predict, row+int64(p))
			b.targets = append(b.targets, s.targets[c])
		}
	}
	return b
}
