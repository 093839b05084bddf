package distant

import (
	"strings"
	"testing"

	"github.com/nerflow/nerflow/corpus"
)

// Each typed entry becomes a sentence tagged as the matcher tags it in
// running text: once per token sequence; an entry whose types tie (Paris)
// is of unknown type and a stopword-only entry (May) is not matched, so
// neither teaches a type and both are left out, as are untyped phrases.
func TestEntrySentences(t *testing.T) {
	typed, err := Read(strings.NewReader("PER\tJohn Smith\nLOC\tParis\nPER\tParis\nPER\tMay\nLOC\tNew York\nLOC\tNew York\nORG\tNew York Times\n"),
		Source{Path: "typed.tsv"}, WithStopwords([]string{"May"}))
	if err != nil {
		t.Fatal(err)
	}
	untyped, err := Read(strings.NewReader("Acme Corp\n"), Source{Path: "untyped.txt"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMatcher([]*Gazetteer{typed, untyped}, WithStopwords([]string{"May"}))
	if err != nil {
		t.Fatal(err)
	}
	c, err := m.EntrySentences([]*Gazetteer{typed, untyped}, corpus.BIO)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range c.Sentences {
		var parts []string
		for i, tok := range s.Tokens {
			parts = append(parts, tok+"/"+s.Tags[i])
		}
		got = append(got, strings.Join(parts, " "))
	}
	want := []string{"John/B-PER Smith/I-PER", "New/B-LOC York/I-LOC", "New/B-ORG York/I-ORG Times/I-ORG"}
	if strings.Join(got, " | ") != strings.Join(want, " | ") {
		t.Errorf("entry sentences:\n got %q\nwant %q", got, want)
	}
}

// Spread keeps n sentences evenly over the list, or the whole list when
// it is no longer than n.
func TestSpread(t *testing.T) {
	var ss []corpus.Sentence
	for i := range 10 {
		ss = append(ss, corpus.Sentence{Tokens: []string{string(rune('a' + i))}})
	}
	words := func(ss []corpus.Sentence) string {
		var b strings.Builder
		for _, s := range ss {
			b.WriteString(s.Tokens[0])
		}
		return b.String()
	}
	for _, c := range []struct {
		n    int
		want string
	}{{4, "acfh"}, {1, "a"}, {0, ""}, {10, "abcdefghij"}, {25, "abcdefghij"}, {-1, ""}} {
		if got := words(Spread(ss, c.n)); got != c.want {
			t.Errorf("Spread(10 sentences, %d) = %q, want %q", c.n, got, c.want)
		}
	}
}
