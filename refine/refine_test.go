package refine

import (
	"slices"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/eval"
)

func sentence(tokens, tags string) corpus.Sentence {
	return corpus.Sentence{Tokens: strings.Fields(tokens), Tags: strings.Fields(tags)}
}

func mustSpans(t *testing.T, c *corpus.Corpus) [][]corpus.Span {
	t.Helper()
	sp, err := Labeled(c)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

func TestAssign(t *testing.T) {
	fold := Assign(23, 5, 1)
	sizes := make([]int, 5)
	for _, f := range fold {
		sizes[f]++
	}
	slices.Sort(sizes)
	if !slices.Equal(sizes, []int{4, 4, 5, 5, 5}) {
		t.Errorf("fold sizes %v, want 23 sentences dealt as 5, 5, 5, 4, 4", sizes)
	}
	if !slices.Equal(Assign(23, 5, 1), fold) {
		t.Error("the same seed dealt the sentences differently")
	}
	if slices.Equal(Assign(23, 5, 2), fold) {
		t.Error("seeds 1 and 2 dealt the sentences alike")
	}
}

// foldFixture: sentence 1 mentions "paris" without labeling it, sentence
// 4 mentions "new york" inside a longer name.
func foldFixture() *corpus.Corpus {
	return &corpus.Corpus{Sentences: []corpus.Sentence{
		sentence("Paris is big", "B-LOC O O"),
		sentence("John went to paris", "B-PER O O O"),
		sentence("Mary met John", "B-PER O B-PER"),
		sentence("New York and Rome", "B-LOC I-LOC O B-LOC"),
		sentence("the New York Times", "O B-ORG I-ORG I-ORG"),
	}}
}

func TestFoldLeavesOutMentions(t *testing.T) {
	c := foldFixture()
	spans := mustSpans(t, c)
	fold := []int{0, 1, 1, 0, 1}
	// Fold 0 holds paris, new york and rome: sentence 1 mentions paris
	// (lower-cased, unlabeled) and sentence 4 new york, so only sentence
	// 2 is left to train on.
	got := Fold(c.Tokens(), spans, fold, 0)
	if !slices.Equal(got.Held, []int{0, 3}) || !slices.Equal(got.Train, []int{2}) || got.Strings != 3 || got.Others != 3 {
		t.Errorf("fold 0: %+v, want held [0 3], train [2] of 3 others, 3 strings", got)
	}
	// Fold 1 holds john, mary and new york times: sentence 3's "New York"
	// is not the whole string, so both others train.
	got = Fold(c.Tokens(), spans, fold, 1)
	if !slices.Equal(got.Held, []int{1, 2, 4}) || !slices.Equal(got.Train, []int{0, 3}) || got.Strings != 3 {
		t.Errorf("fold 1: %+v, want held [1 2 4], train [0 3], 3 strings", got)
	}
}

func TestLabeledErrors(t *testing.T) {
	_, err := Labeled(&corpus.Corpus{Sentences: []corpus.Sentence{sentence("a b", "O O"), {Tokens: []string{"c"}}}})
	if err == nil || !strings.Contains(err.Error(), "sentence 2 has no tags") {
		t.Errorf("untagged sentence: %v, want an error naming sentence 2", err)
	}
	_, err = Labeled(&corpus.Corpus{Sentences: []corpus.Sentence{sentence("a b", "O X-PER")}})
	if err == nil || !strings.Contains(err.Error(), "sentence 1") {
		t.Errorf("bad tag: %v, want an error naming sentence 1", err)
	}
}

func TestAlign(t *testing.T) {
	labeled := &corpus.Corpus{Sentences: []corpus.Sentence{
		sentence("a b", "O O"),
		sentence("c d", "O O"),
		sentence("a b", "O O"),
	}}
	// The folds come in any order, and a repeated sentence pairs with its
	// occurrences in turn.
	preds := []*corpus.Corpus{
		{Sentences: []corpus.Sentence{sentence("c d", "B-LOC O"), sentence("a b", "O B-PER")}},
		{Sentences: []corpus.Sentence{sentence("a b", "B-ORG O")}},
	}
	got, err := Align(labeled, preds)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]corpus.Span{{{Start: 1, End: 2, Label: "PER"}}, {{Start: 0, End: 1, Label: "LOC"}}, {{Start: 0, End: 1, Label: "ORG"}}}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("sentence %d: %v, want %v", i+1, got[i], want[i])
		}
	}
	_, err = Align(labeled, preds[:1])
	if err == nil || !strings.Contains(err.Error(), "sentence 3 of the corpus (and 0 more) has no prediction") {
		t.Errorf("a fold missing: %v, want sentence 3 named", err)
	}
	extra := append(slices.Clone(preds), &corpus.Corpus{Sentences: []corpus.Sentence{sentence("c d", "O O")}})
	_, err = Align(labeled, extra)
	if err == nil || !strings.Contains(err.Error(), "predictions #3, sentence 1") {
		t.Errorf("a sentence predicted twice: %v, want it named", err)
	}
}

// voteFixture: "Paris" is labeled LOC four times, and the fold taggers
// predict it twice (half: kept); "The" is labeled PER three times and
// predicted once (a third: rejected); "EU" is untyped and not weighed.
func voteFixture() (c *corpus.Corpus, predicted *corpus.Corpus) {
	c = &corpus.Corpus{Sentences: []corpus.Sentence{
		sentence("Paris and The EU", "B-LOC O B-PER B-?"),
		sentence("Paris", "B-LOC"),
		sentence("PARIS The", "B-LOC B-PER"),
		sentence("to Paris The", "O B-LOC B-PER"),
	}}
	predicted = &corpus.Corpus{Sentences: []corpus.Sentence{
		sentence("Paris and The EU", "B-LOC O O B-ORG"),
		sentence("Paris", "B-ORG"),
		sentence("PARIS The", "B-LOC B-PER"),
		sentence("to Paris The", "O O O"),
	}}
	return c, predicted
}

// voteGold is the gold tags of voteFixture's sentences: "The" is no
// entity, "EU" an ORG.
func voteGold() *corpus.Corpus {
	return &corpus.Corpus{Sentences: []corpus.Sentence{
		sentence("Paris and The EU", "B-LOC O O B-ORG"),
		sentence("Paris", "B-LOC"),
		sentence("PARIS The", "B-LOC O"),
		sentence("to Paris The", "O B-LOC O"),
	}}
}

func TestVote(t *testing.T) {
	c, predicted := voteFixture()
	labels := mustSpans(t, c)
	pred := mustSpans(t, predicted)
	got, rep := Vote(c, labels, pred, 0.5, true)
	want := [][]corpus.Span{
		{{Start: 0, End: 1, Label: "LOC"}, {Start: 2, End: 3, Label: "?"}, {Start: 3, End: 4, Label: "?"}},
		{{Start: 0, End: 1, Label: "LOC"}},
		{{Start: 0, End: 1, Label: "LOC"}, {Start: 1, End: 2, Label: "?"}},
		{{Start: 1, End: 2, Label: "LOC"}, {Start: 2, End: 3, Label: "?"}},
	}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("unknown: sentence %d: %v, want %v", i+1, got[i], want[i])
		}
	}
	if l, p := *rep.Types["LOC"], *rep.Types["PER"]; l != (TypeVote{Strings: 1, Mentions: 4, AgreedMentions: 2}) || p != (TypeVote{Strings: 1, RejectedStrings: 1, Mentions: 3, RejectedMentions: 3, AgreedMentions: 1}) || len(rep.Types) != 2 {
		t.Errorf("report types LOC %+v, PER %+v, want LOC 1 string of 4 mentions kept (2 agreed), PER 1 of 3 rejected (1 agreed)", *rep.Types["LOC"], *rep.Types["PER"])
	}
	if !slices.Equal(rep.Rejections, []StringVote{{Surface: "the", Type: "PER", Mentions: 3, Agreed: 1}}) {
		t.Errorf("rejections %+v, want \"the\" PER, 1 of 3 agreed", rep.Rejections)
	}

	// Made O instead; and at agreement 0.6, two of four Paris mentions
	// no longer keep it.
	got, rep = Vote(c, labels, pred, 0.6, false)
	if !slices.Equal(got[0], []corpus.Span{{Start: 3, End: 4, Label: "?"}}) || len(got[2]) != 0 || rep.Rejected != RejectO || rep.Types["LOC"].RejectedMentions != 4 {
		t.Errorf("o at 0.6: %v, report %+v, want only the untyped EU left", got, rep)
	}
}

func TestScoreVote(t *testing.T) {
	c, predicted := voteFixture()
	gold := voteGold()
	labels, pred := mustSpans(t, c), mustSpans(t, predicted)
	refined, rep := Vote(c, labels, pred, 0.5, true)
	if err := scoreVote(&rep, gold, c, labels, refined, pred); err != nil {
		t.Fatal(err)
	}
	// Before: 7 typed labels, the 4 Paris right, of 5 gold entities.
	// After: the 3 "The" of unknown type count as O. The predictions: 3
	// of 5 predicted entities right (Paris twice, EU).
	if b, a, p := rep.Before.Micro, rep.After.Micro, rep.Predictions.Micro; b.Correct != 4 || b.Predicted != 7 || a.Correct != 4 || a.Predicted != 4 || a.Support != 5 || p.Correct != 3 || p.Predicted != 5 {
		t.Errorf("scores before %+v, after %+v, predictions %+v", b, a, p)
	}
	short := &corpus.Corpus{Sentences: gold.Sentences[:3]}
	if err := scoreVote(&rep, short, c, labels, refined, pred); err == nil || !strings.Contains(err.Error(), "3 sentences, but the corpus has 4") {
		t.Errorf("gold of 3 sentences: %v", err)
	}
}

func TestChoose(t *testing.T) {
	given := eval.Candidate{Name: "given", F1: 0.7}
	for _, tc := range []struct {
		refined float64
		want    string
	}{{0.71, "refined"}, {0.7, "given"}, {0.5, "given"}} {
		if got := Choose(given, eval.Candidate{Name: "refined", F1: tc.refined}); got.Kept != tc.want {
			t.Errorf("given 0.7, refined %g: kept %s, want %s", tc.refined, got.Kept, tc.want)
		}
	}
}
