package dataset

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/nerflow/nerflow/stages"
)

// PredictionsFile is the name of the predictions file in a predictions
// artifact.
const PredictionsFile = "predictions.jsonl"

// Prediction is a tagger's output for one sentence.
type Prediction struct {
	// Tags are the best tags: the Viterbi path of a CRF, the most probable
	// tag of each token for the token head.
	Tags []string `json:"tags"`
	// Probs holds each token's distribution over the tag set (the CRF's
	// marginals), in the order of Predictions.Tags.
	Probs [][]float32 `json:"probs"`
}

// Predictions are the per-token predictions of a corpus: the scheme and tag
// set of the tagger, and one Prediction per sentence, in corpus order.
type Predictions struct {
	Scheme    string
	Tags      []string // the tag set: the order of every Probs row
	Sentences []Prediction
}

// header is the first line of a predictions file.
type header struct {
	Scheme string   `json:"scheme"`
	Labels []string `json:"labels"`
}

// WritePredictions writes predictions as JSON lines: a header naming the
// scheme and the tag set, then one Prediction per sentence.
func WritePredictions(w io.Writer, p *Predictions) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	if err := enc.Encode(header{Scheme: p.Scheme, Labels: p.Tags}); err != nil {
		return err
	}
	for _, s := range p.Sentences {
		if err := enc.Encode(s); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// ReadPredictions reads what WritePredictions wrote, checked for
// consistency (every token has a tag and a distribution over the tag set).
// Errors name the file (name) and line.
func ReadPredictions(r io.Reader, name string) (*Predictions, error) {
	br := bufio.NewReader(r)
	var h header
	var preds []Prediction
	for line := 1; ; line++ {
		text, err := br.ReadBytes('\n')
		if len(text) == 0 && errors.Is(err, io.EOF) {
			if line == 1 {
				return nil, fmt.Errorf("%s: empty file, want a header line", name)
			}
			return &Predictions{Scheme: h.Scheme, Tags: h.Labels, Sentences: preds}, nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		if line == 1 {
			if err := json.Unmarshal(text, &h); err != nil {
				return nil, fmt.Errorf("%s:1: header: %w", name, err)
			}
			if len(h.Labels) == 0 {
				return nil, fmt.Errorf("%s:1: header has no labels", name)
			}
			continue
		}
		var p Prediction
		if err := json.Unmarshal(text, &p); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		if len(p.Probs) != len(p.Tags) {
			return nil, fmt.Errorf("%s:%d: %d tags but %d probability rows", name, line, len(p.Tags), len(p.Probs))
		}
		for t, row := range p.Probs {
			if len(row) != len(h.Labels) {
				return nil, fmt.Errorf("%s:%d: token %d has %d probabilities for %d labels", name, line, t+1, len(row), len(h.Labels))
			}
		}
		preds = append(preds, p)
	}
}

// ReadPredictionsInput reads the predictions file of a stage's input port.
// Bad input is a permanent error.
func ReadPredictionsInput(in *stages.Input, port string) (*Predictions, error) {
	rc, err := in.Open(PredictionsFile)
	if err != nil {
		return nil, stages.Permanent(fmt.Errorf("input %s: %w", port, err))
	}
	defer rc.Close()
	p, err := ReadPredictions(rc, PredictionsFile)
	if err != nil {
		return nil, stages.Permanent(fmt.Errorf("input %s: %w", port, err))
	}
	return p, nil
}

// WritePredictionsOutput writes predictions as the file of a stage's
// output.
func WritePredictionsOutput(out *stages.Output, p *Predictions) error {
	w, err := out.Create(PredictionsFile)
	if err != nil {
		return err
	}
	if err := WritePredictions(w, p); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

// HardTags returns the best tags of every sentence.
func (p *Predictions) HardTags() [][]string {
	out := make([][]string, len(p.Sentences))
	for i, s := range p.Sentences {
		out[i] = s.Tags
	}
	return out
}

// Soft returns every sentence's per-token distributions over the tag set.
func (p *Predictions) Soft() [][][]float32 {
	out := make([][][]float32, len(p.Sentences))
	for i, s := range p.Sentences {
		out[i] = s.Probs
	}
	return out
}

// SamePredictions tells where two predictions of one corpus differ: the
// first sentence whose tags, or token whose probabilities, are not exactly
// the same (nil when none is). A model loaded back from its files must
// predict what it predicted before it was saved.
func SamePredictions(a, b []Prediction) error {
	if len(a) != len(b) {
		return fmt.Errorf("%d sentences against %d", len(a), len(b))
	}
	for i := range a {
		if !slices.Equal(a[i].Tags, b[i].Tags) {
			return fmt.Errorf("sentence %d: tags %v against %v", i+1, a[i].Tags, b[i].Tags)
		}
		if len(a[i].Probs) != len(b[i].Probs) {
			return fmt.Errorf("sentence %d: probabilities of %d tokens against %d", i+1, len(a[i].Probs), len(b[i].Probs))
		}
		for tok := range a[i].Probs {
			if !slices.Equal(a[i].Probs[tok], b[i].Probs[tok]) {
				return fmt.Errorf("sentence %d token %d: probabilities differ", i+1, tok+1)
			}
		}
	}
	return nil
}
