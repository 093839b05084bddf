package lm

// Kind names the models of this package among the language models a
// tagger can read (see package train/tagger).
const Kind = "bilstm"

// Kind is the models' kind, saved with a tagger that reads them.
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
