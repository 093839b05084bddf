package lm

import (
	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/train"
)

// Kind names the models of this package among the language models a
// tagger can read (train.RegisterLanguageModel).
const Kind = "bilstm"

// TagLM: a tagger reads the models' top-layer states, frozen, and saves
// them with itself; registering the loader lets train.Load bring them
// back with the tagger.
func init() {
	train.RegisterLanguageModel(Kind, func(dir string, device gotch.Device) (train.LanguageModel, error) {
		return Load(dir, device)
	})
}

var _ train.LanguageModel = (*Model)(nil)

// Kind is the models' kind for train.RegisterLanguageModel.
func (m *Model) Kind() string { return Kind }

// StateDim is the size of a token's state for a tagger: the forward and
// the backward top-layer states, concatenated.
func (m *Model) StateDim() int { return 2 * m.Config.Hidden }

// TokenStates returns, per sentence and token, the forward state followed
// by the backward state (see States), computed without gradient in one
// batch: a tagger asks for the sentences of one of its batches.
func (m *Model) TokenStates(sentences [][]string) ([][][]float32, error) {
	fwd, bwd, err := m.States(sentences, max(1, len(sentences)))
	if err != nil {
		return nil, err
	}
	h := m.Config.Hidden
	out := make([][][]float32, len(sentences))
	for i := range sentences {
		out[i] = make([][]float32, len(fwd[i]))
		flat := make([]float32, 2*h*len(fwd[i]))
		for t := range fwd[i] {
			s := flat[2*h*t : 2*h*(t+1)]
			copy(s, fwd[i][t])
			copy(s[h:], bwd[i][t])
			out[i][t] = s
		}
	}
	return out, nil
}
