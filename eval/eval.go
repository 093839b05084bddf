// Package eval scores predicted entity tags against gold ones the way the
// CoNLL shared-task script conlleval does: entities are read from the tags
// with conlleval's chunking rules (corpus.Scheme.Spans), a predicted entity
// is correct when a gold entity has exactly its start, end and type, and
// precision, recall and F1 are micro-averaged over all entities and also
// given per type.
//
// On BIO, IOB1 and IO tags the counts equal those of the original
// conlleval.pl (checked on the CoNLL-2003 training split's distant labels:
// 23,499 gold, 17,781 found, 14,648 correct). The original script knows no
// S- tag, so on BIOES tags the counts follow its later variant that adds
// S- rules (S- always starts an entity and ends it).
package eval

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/nerflow/nerflow/corpus"
)

// ErrLengthMismatch is returned when a gold and a predicted sentence differ
// in length.
var ErrLengthMismatch = errors.New("gold and predicted tags differ in number")

// Score is precision, recall and F1 over a set of entities. The rates are
// fractions in [0, 1]; a rate with a zero denominator is 0, as in conlleval.
type Score struct {
	Precision float64 `json:"precision"`
	Recall    float64 `json:"recall"`
	F1        float64 `json:"f1"`
	// Support is the number of gold entities.
	Support int `json:"support"`
	// Predicted is the number of predicted entities.
	Predicted int `json:"predicted"`
	// Correct is the number of predicted entities that match a gold one
	// exactly.
	Correct int `json:"correct"`
}

func newScore(gold, predicted, correct int) Score {
	s := Score{Support: gold, Predicted: predicted, Correct: correct}
	if predicted > 0 {
		s.Precision = float64(correct) / float64(predicted)
	}
	if gold > 0 {
		s.Recall = float64(correct) / float64(gold)
	}
	if s.Precision+s.Recall > 0 {
		s.F1 = 2 * s.Precision * s.Recall / (s.Precision + s.Recall)
	}
	return s
}

// Report is the result of an evaluation.
type Report struct {
	Scheme    string `json:"scheme"`
	Sentences int    `json:"sentences"`
	Tokens    int    `json:"tokens"`
	// TokenAccuracy is the fraction of tokens whose predicted tag equals the
	// gold tag (prefix and type), conlleval's "accuracy".
	TokenAccuracy float64 `json:"token_accuracy"`
	// Micro scores all entities together.
	Micro Score `json:"micro"`
	// Types scores each entity type that occurs in the gold or predicted
	// tags.
	Types map[string]Score `json:"types"`
}

// TypeNames returns the entity types of the report, sorted.
func (r Report) TypeNames() []string { return slices.Sorted(maps.Keys(r.Types)) }

// Scorer accumulates counts sentence by sentence, so a corpus can be
// scored while it streams.
type Scorer struct {
	scheme      corpus.Scheme
	sentences   int
	tokens      int
	correctTags int
	gold        map[string]int
	predicted   map[string]int
	correct     map[string]int
}

// NewScorer returns a scorer for tags in the scheme; the scheme decides
// which tag prefixes are accepted (corpus.AnyScheme accepts B, I, E and S).
func NewScorer(scheme corpus.Scheme) *Scorer {
	return &Scorer{
		scheme:    scheme,
		gold:      map[string]int{},
		predicted: map[string]int{},
		correct:   map[string]int{},
	}
}

// Add scores one sentence. On error nothing is counted.
func (s *Scorer) Add(gold, pred []string) error {
	if len(gold) != len(pred) {
		return fmt.Errorf("%d gold tags but %d predicted: %w", len(gold), len(pred), ErrLengthMismatch)
	}
	goldSpans, err := s.scheme.Spans(gold)
	if err != nil {
		return fmt.Errorf("gold %w", err)
	}
	predSpans, err := s.scheme.Spans(pred)
	if err != nil {
		return fmt.Errorf("predicted %w", err)
	}
	s.sentences++
	s.tokens += len(gold)
	for i := range gold {
		if gold[i] == pred[i] {
			s.correctTags++
		}
	}
	inGold := make(map[corpus.Span]bool, len(goldSpans))
	for _, sp := range goldSpans {
		inGold[sp] = true
		s.gold[sp.Label]++
	}
	for _, sp := range predSpans {
		s.predicted[sp.Label]++
		if inGold[sp] {
			s.correct[sp.Label]++
		}
	}
	return nil
}

// Report returns the scores of everything added so far.
func (s *Scorer) Report() Report {
	r := Report{
		Scheme:    s.scheme.String(),
		Sentences: s.sentences,
		Tokens:    s.tokens,
		Types:     map[string]Score{},
	}
	if s.tokens > 0 {
		r.TokenAccuracy = float64(s.correctTags) / float64(s.tokens)
	}
	var gold, predicted, correct int
	for typ, n := range s.gold {
		gold += n
		r.Types[typ] = newScore(n, s.predicted[typ], s.correct[typ])
	}
	for typ, n := range s.predicted {
		predicted += n
		correct += s.correct[typ]
		r.Types[typ] = newScore(s.gold[typ], n, s.correct[typ])
	}
	r.Micro = newScore(gold, predicted, correct)
	return r
}

// Evaluate scores whole corpora given as tag sequences, sentence by
// sentence; the error names the first bad sentence (1-based).
func Evaluate(gold, pred [][]string, scheme corpus.Scheme) (Report, error) {
	if len(gold) != len(pred) {
		return Report{}, fmt.Errorf("%d gold sentences but %d predicted: %w", len(gold), len(pred), ErrLengthMismatch)
	}
	s := NewScorer(scheme)
	for i := range gold {
		if err := s.Add(gold[i], pred[i]); err != nil {
			return Report{}, fmt.Errorf("sentence %d: %w", i+1, err)
		}
	}
	return s.Report(), nil
}
