package encoder

import (
	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/augment"
	"github.com/nerflow/nerflow/kit"
	"github.com/nerflow/nerflow/train/tagger"
)

// Kind names the encoder among the language models a tagger can read
// (tagger.RegisterLanguageModel): its top states serve as frozen features,
// as TagLM's LSTM states do.
const Kind = "encoder"

func init() {
	tagger.RegisterLanguageModel(Kind, func(dir string, device gotch.Device) (tagger.LanguageModel, error) {
		return Load(dir, device)
	})
	tagger.RegisterLanguageModelFile(ModelFile, Kind) // train.tagger's lm input
	// RoSTER's augmentation can draw from the masked-LM head
	// (augment.sentences, input lm).
	augment.RegisterMaskedLM(ModelFile, func(dir string, device gotch.Device) (augment.MaskedLM, error) {
		return Load(dir, device)
	})
}

var (
	_ tagger.LanguageModel = (*Model)(nil)
	_ augment.MaskedLM     = (*Model)(nil)
)

// Kind is the encoder's kind for tagger.RegisterLanguageModel.
func (m *Model) Kind() string { return Kind }

// StateDim is the size of a token's state: the encoder's width.
func (m *Model) StateDim() int { return m.Config.Dim }

// TokenStates returns the top states of every token, [sentence][token][Dim],
// without dropout or gradient, nothing masked. A sentence longer than
// MaxLen is read in consecutive windows of MaxLen tokens. The caller holds
// its OS thread (tagger.LanguageModel); TokenStates locks it too.
func (m *Model) TokenStates(sentences [][]string) ([][][]float32, error) {
	out := make([][][]float32, len(sentences))
	var pieces []maskedSentence
	type piece struct{ sentence, offset int }
	var where []piece
	for i, s := range sentences {
		out[i] = make([][]float32, len(s))
		for off := 0; off < len(s); off += m.Config.MaxLen {
			pieces = append(pieces, m.Vocab.mask(s[off:min(off+m.Config.MaxLen, len(s))], Masking{}, nil))
			where = append(where, piece{i, off})
		}
	}
	if len(pieces) == 0 {
		return out, nil
	}
	b := newBatch(pieces)
	d := int64(m.Config.Dim)
	var states []float32
	var err error
	kit.NoGrad(func() {
		g := kit.NewGraph(m.device)
		defer g.Free()
		err = kit.Guard(func() { states = kit.Float32s(m.encode(g, b, false, nil)) })
	})
	if err != nil {
		return nil, err
	}
	for r, p := range where {
		for j := range b.lens[r] {
			at := (int64(r)*b.t + int64(j)) * d
			out[p.sentence][p.offset+j] = states[at : at+d]
		}
	}
	return out, nil
}
