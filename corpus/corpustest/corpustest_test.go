package corpustest

import (
	"reflect"
	"testing"

	"github.com/nerflow/nerflow/corpus"
)

func TestInline(t *testing.T) {
	got := Inline("John/B-PER Smith/I-PER flew", "", "to Paris/B-LOC")
	want := &corpus.Corpus{Sentences: []corpus.Sentence{
		{Tokens: []string{"John", "Smith", "flew"}, Tags: []string{"B-PER", "I-PER", "O"}},
		{},
		{Tokens: []string{"to", "Paris"}, Tags: []string{"O", "B-LOC"}},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}
