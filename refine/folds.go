package refine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/stages"
)

// StageFolds is the name of the fold-splitting stage in specs.
const StageFolds = "refine.folds"

// schemes are the tag schemes the stages write.
var schemes = []string{"io", "bio", "iob1", "bioes"}

func init() {
	stages.Register(stages.Stage{
		Name:    StageFolds,
		Version: 1,
		Doc: "Deals the sentences of a distantly labeled corpus into K folds (a seeded shuffle, dealt in turn) and writes " +
			"fold `fold`: its sentences (held), and the other folds' sentences that mention none of its labeled strings, " +
			"lower-cased, labeled or not (train). A tagger trained on train judges held's labels by their context, not by " +
			"having been told the string. A method fans out over fold, one copy per fold.",
		Params: append([]stages.Param{
			stages.IntParam("folds", 5, "K: the number of folds", stages.Range(2, 100)),
			stages.IntParam("fold", 0, "the fold this node writes, 0 to folds-1", stages.AtLeast(0)),
			stages.IntParam("seed", 1, "seed of the sentences' assignment to folds: every copy of a fan-out must share it", stages.AtLeast(0)),
			stages.StringParam("scheme", "bio", "tag scheme of the output corpora", stages.OneOf(schemes...)),
		}, dataset.SourceParams("corpus", "sentences with distant tags")...),
		Inputs: []stages.Port{{Name: "corpus", Kind: "corpus", Doc: "sentences with distant tags"}},
		Outputs: []stages.Port{
			{Name: "held", Kind: "corpus", Doc: "held.conll: the fold's sentences, with their tags"},
			{Name: "train", Kind: "corpus", Doc: "train.conll: the other folds' sentences that mention none of the fold's labeled strings, with their tags"},
		},
		Run: runFolds,
	})
}

// Assign returns the fold of each of n sentences: a shuffle seeded by
// seed, dealt to the k folds in turn, so that folds differ in size by at
// most one sentence and in nothing else.
func Assign(n, k int, seed uint64) []int {
	perm := rand.New(rand.NewPCG(seed, uint64(k))).Perm(n)
	fold := make([]int, n)
	for i, s := range perm {
		fold[s] = i % k
	}
	return fold
}

// Surface is the key of a labeled string: its words lower-cased and joined
// by spaces, so that "Paris" and "PARIS" are one string.
func Surface(tokens []string, sp corpus.Span) string {
	return strings.ToLower(strings.Join(tokens[sp.Start:sp.End], " "))
}

// Labeled reads the entity spans of every sentence of c, in any scheme.
// A sentence without tags, or with tags of no scheme, is an error naming
// it (1-based).
func Labeled(c *corpus.Corpus) ([][]corpus.Span, error) {
	spans := make([][]corpus.Span, len(c.Sentences))
	for i, s := range c.Sentences {
		if s.Tags == nil {
			return nil, fmt.Errorf("sentence %d has no tags: the corpus must hold distant labels", i+1)
		}
		sp, err := corpus.AnyScheme.Spans(s.Tags)
		if err != nil {
			return nil, fmt.Errorf("sentence %d: %w", i+1, err)
		}
		spans[i] = sp
	}
	return spans, nil
}

// phrases are lower-cased word sequences, indexed by first word so that
// finding them in a sentence costs a lookup per word. (The gazetteer
// matcher of package distant does this with its own tokenizer and case
// rules; here the strings are the corpus's own tokens, compared as they
// are.)
type phrases map[string][][]string

func (p phrases) add(words []string) { p[words[0]] = append(p[words[0]], words) }

// in reports whether any phrase occurs in the lower-cased words.
func (p phrases) in(words []string) bool {
	for i, w := range words {
		for _, ph := range p[w] {
			if i+len(ph) <= len(words) && slices.Equal(words[i:i+len(ph)], ph) {
				return true
			}
		}
	}
	return false
}

// lower returns the words lower-cased, as Surface compares them.
func lower(words []string) []string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = strings.ToLower(w)
	}
	return out
}

// Split is one fold of a labeled corpus, as indexes of its sentences.
type Split struct {
	Held  []int // the fold's sentences
	Train []int // the other folds' sentences that mention none of Held's labeled strings
	// Strings is the number of distinct labeled strings in Held.
	Strings int
	// Others is the number of the other folds' sentences, Train's and
	// those left out for mentioning a held string.
	Others int
}

// Fold returns fold k of a corpus whose sentences' tokens and labeled
// spans are given, under the assignment fold (Assign).
func Fold(tokens [][]string, spans [][]corpus.Span, fold []int, k int) Split {
	held := phrases{}
	var sp Split
	strs := map[string]bool{}
	for i, f := range fold {
		if f != k {
			continue
		}
		sp.Held = append(sp.Held, i)
		for _, e := range spans[i] {
			// Surface's string, lower-cased once for both the set and
			// the phrase index.
			words := lower(tokens[i][e.Start:e.End])
			if s := strings.Join(words, " "); !strs[s] {
				strs[s] = true
				held.add(words)
			}
		}
	}
	sp.Strings = len(strs)
	for i, f := range fold {
		if f == k {
			continue
		}
		sp.Others++
		if !held.in(lower(tokens[i])) {
			sp.Train = append(sp.Train, i)
		}
	}
	return sp
}

// subcorpus returns the sentences of c at idx (nil: all of them), their
// tags written in the scheme from spans, one list per sentence of c.
func subcorpus(c *corpus.Corpus, spans [][]corpus.Span, idx []int, scheme corpus.Scheme) (*corpus.Corpus, error) {
	if idx == nil {
		idx = make([]int, len(c.Sentences))
		for i := range idx {
			idx[i] = i
		}
	}
	out := &corpus.Corpus{Sentences: make([]corpus.Sentence, len(idx))}
	for j, i := range idx {
		s := c.Sentences[i]
		tags, err := scheme.Tags(spans[i], len(s.Tokens), corpus.MergeAdjacent())
		if err != nil {
			return nil, fmt.Errorf("sentence %d: %w", i+1, err)
		}
		out.Sentences[j] = corpus.Sentence{Tokens: s.Tokens, Tags: tags, DocStart: s.DocStart}
	}
	return out, nil
}

func runFolds(c *stages.Context) error {
	p := c.Params
	k, fold := p.Int("folds"), p.Int("fold")
	if fold >= k {
		return stages.Permanent(fmt.Errorf("param fold: %d is not one of the %d folds (0 to %d)", fold, k, k-1))
	}
	scheme, labeled, spans, err := readLabeled(c)
	if err != nil {
		return err
	}
	if len(labeled.Sentences) < k {
		return stages.Permanent(fmt.Errorf("input corpus: %d sentences cannot make %d folds", len(labeled.Sentences), k))
	}
	split := Fold(labeled.Tokens(), spans, Assign(len(labeled.Sentences), k, uint64(p.Int("seed"))), fold)
	c.Log.Info("fold", "fold", fold, "held", len(split.Held), "strings", split.Strings, "train", len(split.Train), "of", split.Others)
	if len(split.Train) == 0 {
		return stages.Permanent(fmt.Errorf("fold %d: every other sentence mentions one of its %d labeled strings, which leaves nothing to train on", fold, split.Strings))
	}
	for _, part := range []struct {
		name string
		idx  []int
	}{{"held", split.Held}, {"train", split.Train}} {
		sub, err := subcorpus(labeled, spans, part.idx, scheme)
		if err != nil {
			return stages.Permanent(fmt.Errorf("input corpus: %w", err))
		}
		out := c.Output(part.name)
		out.SetMeta("sentences", fmt.Sprint(len(sub.Sentences)))
		if err := dataset.WriteTagged(out, part.name, sub, corpus.FormatCoNLL, scheme); err != nil {
			return err
		}
	}
	return nil
}

// readLabeled reads what the folds and the vote share: the output scheme
// (param scheme) and the distantly labeled corpus of input corpus, with
// its spans.
func readLabeled(c *stages.Context) (corpus.Scheme, *corpus.Corpus, [][]corpus.Span, error) {
	scheme, err := corpus.ParseScheme(c.Params.String("scheme"))
	if err != nil {
		return scheme, nil, nil, stages.Permanent(err)
	}
	labeled, err := dataset.ReadInput(c.Input("corpus"), c.Params, "corpus")
	if err != nil {
		return scheme, nil, nil, err
	}
	spans, err := Labeled(labeled)
	if err != nil {
		return scheme, nil, nil, stages.Permanent(fmt.Errorf("input corpus: %w", err))
	}
	return scheme, labeled, spans, nil
}
