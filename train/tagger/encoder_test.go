package tagger

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/kit"
)

// spelling is an Encoder whose state of a token is (its sentence's first
// word's length, its position, its own length), laid out sentence after
// sentence: enough to tell whether the tagger puts each state at its
// token's place in the packed order. Its one weight scales the states.
type spelling struct{ scale *ts.Tensor }

func (spelling) Kind() string  { return "spelling" }
func (spelling) StateDim() int { return 3 }
func (e spelling) States(g *kit.Graph, sentences [][]string, _ bool, _ *rand.Rand) *ts.Tensor {
	var v []float32
	for _, s := range sentences {
		for t, w := range s {
			v = append(v, float32(len(s[0])), float32(t), float32(len(w)))
		}
	}
	return g.T(g.Floats(v, int64(len(v)/3), 3).Mul(e.scale, false))
}
func (e spelling) Weights() []ts.NamedTensor {
	return []ts.NamedTensor{{Name: "scale", Tensor: e.scale}}
}
func (spelling) Save(string) error { return nil }
func (e spelling) Close()          {}

// With encoder_placement replace, the tagger's features are the encoder's
// states, each at its token's place in the packed order (sentences sorted
// by length, tokens step by step), and the head reads EncoderDim values.
func TestEncoderStatesInPackedOrder(t *testing.T) {
	c := fixtureCorpus(fixture)
	cfg := tinyConfig(TokenHead, "io")
	cfg.EncoderPlacement = EncoderReplace
	g0 := kit.NewGraph(gotch.CPU)
	defer g0.Free()
	var scale *ts.Tensor
	if err := kit.Guard(func() { scale = g0.Floats([]float32{1}, 1) }); err != nil {
		t.Fatal(err)
	}
	labels, _ := NewLabels(corpus.IO, []string{"PER", "LOC"})
	m, err := NewTagger(cfg, NewVocab(c, nil, MinWordCount(1)), labels, nil, 1, gotch.CPU, WithEncoder(spelling{scale}))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Config.EncoderDim != 3 || m.Config.headInput() != 3 || m.lstm != nil || m.wordEmb != nil {
		t.Fatalf("encoder_dim %d, head input %d, BiLSTM %v: want the encoder's states alone", m.Config.EncoderDim, m.Config.headInput(), m.lstm != nil)
	}
	got := encode(t, m, c)
	exs, _ := m.encodeCorpus(c, false)
	b := newBatch(exs, []int{0, 1, 2})
	for i, id := range b.ids {
		s := c.Sentences[id].Tokens
		for tok, w := range s {
			p := b.pos(i, tok)
			if want := []float32{float32(len(s[0])), float32(tok), float32(len(w))}; !slices.Equal(got[p*3:p*3+3], want) {
				t.Errorf("sentence %d token %d (%s): row %d is %v, want %v", id, tok, w, p, got[p*3:p*3+3], want)
			}
		}
	}

	// An encoder without a placement, and a placement without an encoder,
	// are refused.
	cfg.EncoderPlacement = EncoderNone
	if _, err := NewTagger(cfg, NewVocab(c, nil, MinWordCount(1)), labels, nil, 1, gotch.CPU, WithEncoder(spelling{scale})); err == nil {
		t.Error("an encoder without encoder_placement was accepted")
	}
	cfg.EncoderPlacement = EncoderUnder
	if _, err := NewTagger(cfg, NewVocab(c, nil, MinWordCount(1)), labels, nil, 1, gotch.CPU); err == nil {
		t.Error("encoder_placement under without an encoder was accepted")
	}
}
