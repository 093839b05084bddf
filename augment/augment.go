// Package augment is RoSTER's contextual augmentation: in each sentence a
// fraction of the tokens (15%) is masked, and each masked token is
// replaced with a word sampled from the top 5 of the masked-word
// distribution of the bidirectional language models of package lm, unless
// the sampled word would change the token's shape (capitalization, digits,
// punctuation), in which case the original stays. Tags are never changed.
//
// Sentences regenerates the augmentations of a corpus (RoSTER draws new
// ones for every self-training epoch); the stages augment.lm and
// augment.sentences train the language models and augment a corpus in a
// pipeline.
package augment

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"unicode"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/train/lm"
)

// Config of an augmentation.
type Config struct {
	Rate      float64 `json:"rate"`  // fraction of each sentence's tokens masked
	TopK      int     `json:"top_k"` // replacements are sampled from this many most likely words
	Seed      uint64  `json:"seed"`
	BatchSize int     `json:"batch_size"` // sentences per language-model batch
}

// DefaultConfig is RoSTER's: 15% of the tokens, top 5.
func DefaultConfig() Config { return Config{Rate: 0.15, TopK: 5, Seed: 1, BatchSize: 64} }

func (c Config) validate() error {
	if c.Rate < 0 || c.Rate > 1 || c.TopK < 1 || c.BatchSize < 1 {
		return fmt.Errorf("augmentation: rate %v (want [0, 1]), top k %d, batch size %d (want at least 1)", c.Rate, c.TopK, c.BatchSize)
	}
	return nil
}

// Stats counts what an augmentation did.
type Stats struct {
	Tokens   int `json:"tokens"`
	Masked   int `json:"masked"`
	Replaced int `json:"replaced"` // by a different word of the same shape
	Same     int `json:"same"`     // the sampled word was the original
	Kept     int `json:"kept"`     // the sampled word had another shape
}

// MaskedLM is what replacements are drawn from: the forward and backward
// LSTM language models (lm.Model) or a masked-LM encoder (package
// train/encoder, which registers its loader with RegisterMaskedLM).
type MaskedLM interface {
	// MaskedTopK returns per query the k most likely words at its
	// position (ids into Words, best first, log-probabilities up to a
	// constant per query), never an id that must not be drawn. The model
	// ranks them itself, on its device: the drawing needs no more, and the
	// vocabulary's distribution of every masked word never reaches the
	// host.
	MaskedTopK(sentences [][]string, queries []lm.Masked, k, batchSize int) ([][]lm.Candidate, error)
	Words() []string
	Close()
}

// Sentences returns an augmented copy of sents for the given epoch: the
// draws depend on (Seed, epoch) only, so every epoch gets its own
// augmentations and a rerun gets the same ones. Tags and document starts
// are copied unchanged. It locks the calling goroutine to its OS thread.
//
// It streams: the model is asked for BatchSize sentences at a time, and
// their distributions are sampled and dropped before the next ones are
// computed, so that its memory beyond the output does not grow with the
// corpus (all at once, the distributions of CoNLL-2003's ~30,500 masked
// words over 20,000 words take 4.9 GB as float64: most of the 6.7 GB peak
// measured while drawing an epoch). The sentences' masks and uniforms
// are drawn in corpus order as before, and the chunks are the model's own
// batches, so the augmentation is the one the whole-corpus call drew.
func Sentences(m MaskedLM, sents []corpus.Sentence, cfg Config, epoch int) ([]corpus.Sentence, Stats, error) {
	var st Stats
	if err := cfg.validate(); err != nil {
		return nil, st, err
	}
	if m == nil {
		return nil, st, errors.New("augmentation: no language model")
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, uint64(epoch)))
	out := make([]corpus.Sentence, len(sents))
	for i, s := range sents {
		out[i] = corpus.Sentence{Tokens: slices.Clone(s.Tokens), Tags: slices.Clone(s.Tags), DocStart: s.DocStart}
	}
	words := m.Words()
	for start := 0; start < len(sents); start += cfg.BatchSize {
		chunk := sents[start:min(start+cfg.BatchSize, len(sents))]
		tokens := make([][]string, len(chunk))
		var queries []lm.Masked
		var draws []float64 // one uniform per query
		for i, s := range chunk {
			tokens[i] = s.Tokens
			st.Tokens += len(s.Tokens)
			for _, t := range maskedPositions(len(s.Tokens), cfg.Rate, rng) {
				queries = append(queries, lm.Masked{Sentence: i, Position: t})
				draws = append(draws, rng.Float64())
			}
		}
		if len(queries) == 0 {
			continue
		}
		top, err := m.MaskedTopK(tokens, queries, cfg.TopK, cfg.BatchSize)
		if err != nil {
			return nil, st, fmt.Errorf("augmentation: %w", err)
		}
		for qi, q := range queries {
			st.Masked++
			orig := chunk[q.Sentence].Tokens[q.Position]
			w := words[draw(top[qi], draws[qi])]
			switch {
			case w == orig:
				st.Same++
			case Shape(w) != Shape(orig):
				st.Kept++
			default:
				out[start+q.Sentence].Tokens[q.Position] = w
				st.Replaced++
			}
		}
	}
	return out, st, nil
}

// maskedPositions draws the positions to mask in a sentence of n tokens:
// floor(rate·n) of them, plus one more with probability frac(rate·n), so
// that the expected fraction is exactly rate, in increasing order.
func maskedPositions(n int, rate float64, rng *rand.Rand) []int {
	x := rate * float64(n)
	k := int(math.Floor(x))
	if rng.Float64() < x-float64(k) {
		k++
	}
	if k == 0 {
		return nil
	}
	pos := rng.Perm(n)[:k]
	slices.Sort(pos)
	return pos
}

// draw picks one of the candidates with probability proportional to
// exp(score), by the uniform u: the scores need only be right up to a
// constant.
func draw(cands []lm.Candidate, u float64) int {
	if len(cands) == 0 {
		panic("augment: no candidate word to draw")
	}
	best := cands[0].Score
	for _, c := range cands {
		best = max(best, c.Score)
	}
	var total float64
	for _, c := range cands {
		total += math.Exp(c.Score - best)
	}
	r := u * total
	for _, c := range cands {
		r -= math.Exp(c.Score - best)
		if r < 0 {
			return c.ID
		}
	}
	return cands[len(cands)-1].ID
}

// Shape is a token's form without its letters' identity: upper-case
// letters become X, lower-case x, digits d, anything else stays, and runs
// of one class collapse ("Paris" Xx, "U.S." X.X., "1996" d, "3-2" d-d,
// "McDonald" XxXx). A replacement must have the original's shape.
func Shape(token string) string {
	var b strings.Builder
	var last rune = -1
	for _, r := range token {
		c := r
		switch {
		case unicode.IsUpper(r):
			c = 'X'
		case unicode.IsLower(r):
			c = 'x'
		case unicode.IsDigit(r):
			c = 'd'
		}
		if c == last && (c == 'X' || c == 'x' || c == 'd') {
			continue
		}
		b.WriteRune(c)
		last = c
	}
	return b.String()
}
