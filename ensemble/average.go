package ensemble

import (
	"fmt"
	"slices"

	"github.com/nerflow/nerflow/dataset"
)

// Average returns the mean of the per-token distributions of several
// taggers' predictions of the same corpus, with each token's best tag the
// most probable tag of the mean (RoSTER's ensemble targets). names name the
// predictions in errors (an artifact, a file). All must have the scheme and
// tag set of the first, its number of sentences, and in every sentence its
// number of tokens.
func Average(names []string, preds []*dataset.Predictions) (*dataset.Predictions, error) {
	if len(preds) == 0 {
		return nil, fmt.Errorf("ensemble: no predictions to average")
	}
	if len(names) != len(preds) {
		return nil, fmt.Errorf("ensemble: %d names for %d predictions", len(names), len(preds))
	}
	first := preds[0]
	for k, p := range preds[1:] {
		if err := sameShape(first, p); err != nil {
			return nil, fmt.Errorf("ensemble: %s against %s: %w", names[k+1], names[0], err)
		}
	}
	inv := 1 / float64(len(preds))
	out := &dataset.Predictions{Scheme: first.Scheme, Tags: slices.Clone(first.Tags), Sentences: make([]dataset.Prediction, len(first.Sentences))}
	sum := make([]float64, len(first.Tags))
	for i, s := range first.Sentences {
		avg := dataset.Prediction{Tags: make([]string, len(s.Probs)), Probs: make([][]float32, len(s.Probs))}
		for t := range s.Probs {
			clear(sum)
			for _, p := range preds {
				for c, x := range p.Sentences[i].Probs[t] {
					sum[c] += float64(x)
				}
			}
			row := make([]float32, len(sum))
			best := 0
			for c, x := range sum {
				row[c] = float32(x * inv)
				if row[c] > row[best] {
					best = c
				}
			}
			avg.Probs[t], avg.Tags[t] = row, first.Tags[best]
		}
		out.Sentences[i] = avg
	}
	return out, nil
}

// sameShape says how p does not predict the corpus a does with a's tag set.
func sameShape(a, p *dataset.Predictions) error {
	if p.Scheme != a.Scheme || !slices.Equal(p.Tags, a.Tags) {
		return fmt.Errorf("tag set %s %v, want %s %v", p.Scheme, p.Tags, a.Scheme, a.Tags)
	}
	if len(p.Sentences) != len(a.Sentences) {
		return fmt.Errorf("%d sentences, want %d", len(p.Sentences), len(a.Sentences))
	}
	for i := range a.Sentences {
		if got, want := len(p.Sentences[i].Probs), len(a.Sentences[i].Probs); got != want {
			return fmt.Errorf("sentence %d: %d tokens, want %d (token %d is missing on one side)", i+1, got, want, min(got, want)+1)
		}
		for t, row := range p.Sentences[i].Probs {
			if len(row) != len(a.Tags) {
				return fmt.Errorf("sentence %d, token %d: %d probabilities for %d tags", i+1, t+1, len(row), len(a.Tags))
			}
		}
	}
	return nil
}
