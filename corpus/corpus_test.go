package corpus

import (
	"errors"
	"slices"
	"testing"
)

func TestMapSentencesNamesTheSentence(t *testing.T) {
	c := &Corpus{Sentences: []Sentence{{Tokens: []string{"a"}}, {Tokens: []string{"b", "c"}}, {Tokens: []string{}}}}
	lengths, err := MapSentences(c, func(s Sentence) (int, error) { return len(s.Tokens), nil })
	if err != nil || !slices.Equal(lengths, []int{1, 2, 0}) {
		t.Fatalf("lengths %v, err %v", lengths, err)
	}
	_, err = MapSentences(c, func(s Sentence) (int, error) {
		if len(s.Tokens) == 0 {
			return 0, errors.New("empty")
		}
		return len(s.Tokens), nil
	})
	if err == nil || err.Error() != "sentence 3: empty" {
		t.Fatalf("err %v, want sentence 3: empty", err)
	}
}
