package dataset

import (
	"strings"
	"testing"
)

// SamePredictions names the first difference: tags, a token's
// probabilities, or the counts; identical predictions are no error.
func TestSamePredictions(t *testing.T) {
	a := []Prediction{{Tags: []string{"B-PER", "O"}, Probs: [][]float32{{0.9, 0.1}, {0.2, 0.8}}}}
	same := []Prediction{{Tags: []string{"B-PER", "O"}, Probs: [][]float32{{0.9, 0.1}, {0.2, 0.8}}}}
	if err := SamePredictions(a, same); err != nil {
		t.Errorf("identical predictions: %v", err)
	}
	for _, c := range []struct {
		b    []Prediction
		want string
	}{
		{[]Prediction{{Tags: []string{"B-PER", "B-LOC"}, Probs: a[0].Probs}}, "sentence 1: tags"},
		{[]Prediction{{Tags: a[0].Tags, Probs: [][]float32{{0.9, 0.1}, {0.2, 0.7}}}}, "sentence 1 token 2: probabilities differ"},
		{[]Prediction{{Tags: a[0].Tags, Probs: a[0].Probs[:1]}}, "probabilities of 2 tokens against 1"},
		{append(same, same...), "1 sentences against 2"},
	} {
		if err := SamePredictions(a, c.b); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want an error %q, got %v", c.want, err)
		}
	}
}
