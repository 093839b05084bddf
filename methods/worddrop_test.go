package methods_test

import (
	"strings"
	"testing"
)

// word_dropout reaches every tagger a distant method trains from scratch
// (the student and the span seeds too), at the method's default or as
// set; the steps that go on training one of them (bond's stage 2, the
// teacher-student rounds) keep the rate the model carries and do not
// declare it. Roster defaults to the rate chosen on CoNLL-2003, the other
// methods to none.
func TestWordDropoutReachesEveryTagger(t *testing.T) {
	// Roster's, negsample's and autoner's default, chosen on CoNLL-2003's
	// dev split (docs/tagger.md, docs/negsample.md, docs/autoner.md).
	const defaultWordDropout = 0.25
	roster := strings.Replace(rosterOnGazetteers, "seeds: [1, 2], partial: true, student: kl,", "seeds: [1, 2], span_seeds: [3, 4], partial: true, student: crf, teacher_student: true,", 1)
	bond := strings.Replace(strings.Replace(rosterOnGazetteers, "method: roster", "method: bond", 1), "seeds: [1, 2], partial: true, student: kl, ", "", 1)
	negsample := strings.Replace(strings.Replace(rosterOnGazetteers, "method: roster", "method: negsample", 1), "seeds: [1, 2], partial: true, student: kl, miss_rate: 0.4, ", "", 1)
	distant := strings.Replace(strings.Replace(rosterOnGazetteers, "method: roster", "method: distant", 1), "seeds: [1, 2], partial: true, student: kl, miss_rate: 0.4, ", "", 1)
	for _, c := range []struct {
		name, text string
		def        float64
		nodes      []string // trained from scratch
		keep       []string // go on training one of them
	}{
		{"roster", roster, defaultWordDropout, []string{"noise[seed=1]", "noise[seed=2]", "span[seed=3]", "span[seed=4]", "distil"}, []string{"teacher-student"}},
		{"bond", bond, 0, []string{"early"}, []string{"selftrain"}},
		{"negsample", negsample, defaultWordDropout, []string{"train[sampling=uniform]", "train[sampling=weighted]"}, nil},
		{"autoner", autonerSpec, defaultWordDropout, []string{"fuzzy[seed=1]", "tiebreak[seed=2]"}, nil},
		{"distant", distant, 0, []string{"ce", "gce", "gce-removal"}, nil},
	} {
		for _, set := range []struct {
			text string
			want float64
		}{
			{c.text, c.def},
			{strings.Replace(c.text, "params: {", "params: {word_dropout: 0.1, ", 1), 0.1},
		} {
			g, err := expand(t, fixture(t), set.text)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			for _, n := range c.nodes {
				if got := nodeParams(t, g, n)["word_dropout"]; got != set.want {
					t.Errorf("%s: node %s has word_dropout %v, want %v", c.name, n, got, set.want)
				}
			}
			for _, n := range c.keep {
				if got, ok := nodeParams(t, g, n)["word_dropout"]; ok {
					t.Errorf("%s: node %s, which goes on training a model, declares word_dropout (%v)", c.name, n, got)
				}
			}
		}
	}
	if _, err := expand(t, fixture(t), strings.Replace(roster, "params: {", "params: {word_dropout: 1, ", 1)); err == nil || !strings.Contains(err.Error(), "word_dropout") {
		t.Errorf("word_dropout 1: %v", err)
	}
}
