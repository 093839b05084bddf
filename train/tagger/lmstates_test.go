package tagger

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/kit"
)

// formulaLM is a language model whose states are a known formula of the
// word and its position, so that a test can tell which state reached which
// token. It is the LanguageModel contract with nothing learned (package
// lm's real models are tested with the tagger in taglm_test.go).
type formulaLM struct {
	Dim   int     `json:"dim"`
	Scale float32 `json:"scale"`
}

const formulaKind = "test-formula"

func init() {
	RegisterLanguageModel(formulaKind, func(dir string, _ gotch.Device) (LanguageModel, error) {
		b, err := os.ReadFile(filepath.Join(dir, "formula.json"))
		if err != nil {
			return nil, err
		}
		var m formulaLM
		return &m, json.Unmarshal(b, &m)
	})
}

func (m *formulaLM) Kind() string  { return formulaKind }
func (m *formulaLM) StateDim() int { return m.Dim }
func (m *formulaLM) Close()        {}

// state of the token word at position t: component k is
// Scale·sin((k+1)·len(word) + t).
func (m *formulaLM) state(word string, t int) []float32 {
	s := make([]float32, m.Dim)
	for k := range s {
		s[k] = m.Scale * float32(math.Sin(float64((k+1)*len(word)+t)))
	}
	return s
}

func (m *formulaLM) TokenStates(sentences [][]string) ([][][]float32, error) {
	out := make([][][]float32, len(sentences))
	for i, s := range sentences {
		for t, w := range s {
			out[i] = append(out[i], m.state(w, t))
		}
	}
	return out, nil
}

func (m *formulaLM) Save(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, _ := json.Marshal(m)
	return os.WriteFile(filepath.Join(dir, "formula.json"), b, 0o644)
}

func lmConfig(placement string) Config {
	cfg := tinyConfig(CRFHead, "bio")
	cfg.Layers, cfg.LMPlacement = 2, placement
	return cfg
}

func newTinyLM(t *testing.T, c *corpus.Corpus, cfg Config, lm LanguageModel) *Tagger {
	t.Helper()
	labels, err := NewLabels(corpus.BIO, []string{"PER", "LOC"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewTagger(cfg, NewVocab(c, nil, MinWordCount(1)), labels, nil, 1, gotch.CPU, WithLanguageModel(lm))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// The input size of each BiLSTM layer: word 12 + characters 8 + casing 4
// = 24 for the first, 2 × 10 for the second, plus the language model's 6
// where its states enter.
func TestLayerInputs(t *testing.T) {
	for placement, want := range map[string][]int{LMNone: {24, 20}, LMInput: {30, 20}, LMLayer1: {24, 26}} {
		cfg := lmConfig(placement)
		if placement != LMNone {
			cfg.LMDim = 6
		}
		if got := cfg.layerInputs(); !slices.Equal(got, want) {
			t.Errorf("%s: layer inputs %v, want %v", placement, got, want)
		}
		if placement == LMNone {
			continue
		}
		m := newTinyLM(t, fixtureCorpus(fixture), cfg, &formulaLM{Dim: 6, Scale: 1})
		for l, name := range []string{"lstm_w_ih_l0", "lstm_w_ih_l1_reverse"} {
			w, _ := m.vs.Root().Get(name)
			if got, _ := w.Size(); !slices.Equal(got, []int64{40, int64(want[l])}) {
				t.Errorf("%s: %s is %v, want [40 %d]", placement, name, got, want[l])
			}
		}
	}
}

// The language model's states reach each token in the packed layout: row
// b.pos(i, t) holds the state of token t of the batch's i-th sentence.
func TestLMStatesPacked(t *testing.T) {
	c := fixtureCorpus(fixture)
	lm := &formulaLM{Dim: 3, Scale: 1}
	m := newTinyLM(t, c, lmConfig(LMInput), lm)
	exs, err := m.encodeCorpus(c, false)
	if err != nil {
		t.Fatal(err)
	}
	b := newBatch(exs, []int{7, 0, 2}) // 4, 6 and 8 tokens: sorted by length, the order changes
	g := kit.NewGraph(m.device)
	defer g.Free()
	var got []float32
	if err := kit.Guard(func() { got = kit.Float32s(m.lmStates(g, b)) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != b.n*3 || b.n != 18 {
		t.Fatalf("%d values for %d tokens", len(got), b.n)
	}
	for i, id := range b.ids {
		for tok, w := range c.Sentences[id].Tokens {
			p := b.pos(i, tok)
			if row := got[p*3 : p*3+3]; !slices.Equal(row, lm.state(w, tok)) {
				t.Errorf("sentence %d token %d (%s): row %d is %v, want %v", id, tok, w, p, row, lm.state(w, tok))
			}
		}
	}
}

// encode runs the tagger's encoder without dropout on the first sentences
// of c and returns its output.
func encode(t *testing.T, m *Tagger, c *corpus.Corpus) []float32 {
	t.Helper()
	exs, err := m.encodeCorpus(c, false)
	if err != nil {
		t.Fatal(err)
	}
	b := newBatch(exs, []int{0, 1, 2})
	g := kit.NewGraph(m.device)
	defer g.Free()
	var out []float32
	if err := kit.Guard(func() { kit.NoGrad(func() { out = kit.Float32s(m.forward(g, b, false, nil)) }) }); err != nil {
		t.Fatal(err)
	}
	return out
}

// zeroColumns zeroes columns [from, from+n) of the input weights of BiLSTM
// layer l, both directions.
func zeroColumns(t *testing.T, m *Tagger, l int, from, n int64) {
	t.Helper()
	for _, dir := range []string{"", "_reverse"} {
		w, _ := m.vs.Root().Get(fmt.Sprintf("lstm_w_ih_l%d%s", l, dir))
		err := kit.Guard(func() {
			kit.NoGrad(func() {
				cols, err := w.Narrow(1, from, n, false)
				if err != nil {
					kit.Abort(err)
				}
				if err := cols.Zero_(); err != nil {
					kit.Abort(err)
				}
				cols.MustDrop()
			})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// The language model's states enter where LMPlacement says, as the last
// columns of that layer's input: other states change the encoder's output,
// unless exactly those columns of that layer's input weights are zero (the
// same columns of the other layer do not cut them off).
func TestLMPlacement(t *testing.T) {
	c := fixtureCorpus(fixture)
	a, b := &formulaLM{Dim: 4, Scale: 1}, &formulaLM{Dim: 4, Scale: -2}
	for placement, layer := range map[string]int{LMInput: 0, LMLayer1: 1} {
		t.Run(placement, func(t *testing.T) {
			// dependsOnLM says whether the output of a fresh tagger, with
			// the last 4 input columns of layer l zeroed, changes with the
			// language model's states.
			dependsOnLM := func(l int) bool {
				m := newTinyLM(t, c, lmConfig(placement), a)
				zeroColumns(t, m, l, int64(m.Config.layerInputs()[l]-4), 4)
				withA := encode(t, m, c)
				m.lm = b
				return !slices.Equal(encode(t, m, c), withA)
			}
			if !dependsOnLM(1 - layer) {
				t.Errorf("the language model's states do not count (or enter layer %d)", 1-layer)
			}
			if dependsOnLM(layer) {
				t.Errorf("layer %d's weights of its last 4 inputs are zero, yet the language model's states count", layer)
			}
		})
	}
}

func TestLMConfigErrors(t *testing.T) {
	c := fixtureCorpus(fixture)
	labels, _ := NewLabels(corpus.BIO, []string{"PER", "LOC"})
	lm := &formulaLM{Dim: 4, Scale: 1}
	for _, tc := range []struct {
		cfg  Config
		lm   bool
		want string
	}{
		{tinyConfig(CRFHead, "bio"), true, "a language model was given, but lm_placement is none"},
		{lmConfig(LMLayer1), false, "lm_placement layer1 needs a language model"},
		{func() Config { c := lmConfig(LMLayer1); c.Layers = 1; return c }(), true, "layers is 1, want at least 2"},
		{lmConfig("output"), true, `lm_placement "output": want one of none, input, layer1`},
	} {
		var opts []TaggerOption
		if tc.lm {
			opts = append(opts, WithLanguageModel(lm))
		}
		_, err := NewTagger(tc.cfg, NewVocab(c, nil), labels, nil, 1, gotch.CPU, opts...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

// A saved tagger holds its language model: loaded, it encodes as before.
func TestLMSaveLoad(t *testing.T) {
	c := fixtureCorpus(fixture)
	m := newTinyLM(t, c, lmConfig(LMLayer1), &formulaLM{Dim: 4, Scale: 1})
	dir := t.TempDir()
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, TaggerFile))
	if !strings.Contains(string(b), `"format":3`) || !strings.Contains(string(b), `"lm":{"kind":"test-formula","dir":"lm"}`) {
		t.Errorf("%s: %s", TaggerFile, b)
	}
	l, err := Load(dir, gotch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Config.LMDim != 4 || !slices.Equal(encode(t, l, c), encode(t, m, c)) {
		t.Errorf("loaded tagger: lm_dim %d, or another output", l.Config.LMDim)
	}
	os.RemoveAll(filepath.Join(dir, lmDir))
	if _, err := Load(dir, gotch.CPU); err == nil || !strings.Contains(err.Error(), "language model") {
		t.Errorf("without its language model: %v", err)
	}
}
