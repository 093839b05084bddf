package encoder

import (
	"fmt"
	"slices"
	"strings"
)

// Config is the encoder's architecture.
type Config struct {
	Dim     int `json:"dim"`     // width of the hidden states
	Layers  int `json:"layers"`  // transformer layers
	Heads   int `json:"heads"`   // attention heads; divides Dim
	FFN     int `json:"ffn"`     // inner width of the feed-forward blocks
	MaxLen  int `json:"max_len"` // learned positions; longer sentences are read in windows
	WordDim int `json:"word_dim"`
	// CharDim and CharFilters size the character CNN (kernel 3, max-pooled),
	// which gives every token, known word or not, a vector from its spelling.
	CharDim     int     `json:"char_dim"`
	CharFilters int     `json:"char_filters"`
	Dropout     float64 `json:"dropout"`      // on the input, after every sublayer and in the head
	AttnDropout float64 `json:"attn_dropout"` // on the attention probabilities
	// PreLN puts the layer norms before each sublayer (and one after the
	// last layer) instead of after each residual sum (BERT, RoBERTa):
	// small models trained briefly with little warm-up converge more
	// reliably that way.
	PreLN bool `json:"pre_ln"`
}

// Presets are named sizes: small finishes a default pretraining (Brown plus
// a corpus, a few epochs) within an hour on 2 CPU cores; the larger ones are
// for GPUs.
var Presets = map[string]Config{
	"tiny":   {Dim: 64, Layers: 2, Heads: 2, FFN: 256, MaxLen: 128, WordDim: 64, CharDim: 16, CharFilters: 32, Dropout: 0.1, AttnDropout: 0.1, PreLN: true},
	"small":  {Dim: 128, Layers: 4, Heads: 4, FFN: 512, MaxLen: 128, WordDim: 100, CharDim: 30, CharFilters: 50, Dropout: 0.1, AttnDropout: 0.1, PreLN: true},
	"medium": {Dim: 256, Layers: 6, Heads: 4, FFN: 1024, MaxLen: 256, WordDim: 100, CharDim: 30, CharFilters: 100, Dropout: 0.1, AttnDropout: 0.1, PreLN: true},
	"base":   {Dim: 768, Layers: 12, Heads: 12, FFN: 3072, MaxLen: 512, WordDim: 256, CharDim: 50, CharFilters: 256, Dropout: 0.1, AttnDropout: 0.1, PreLN: true},
}

// DefaultPreset is the preset of a pretraining on CPU.
const DefaultPreset = "small"

// PresetNames lists the presets, smallest first.
func PresetNames() []string {
	names := make([]string, 0, len(Presets))
	for n := range Presets {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int { return Presets[a].Dim*Presets[a].Layers - Presets[b].Dim*Presets[b].Layers })
	return names
}

// Preset returns a preset by name.
func Preset(name string) (Config, error) {
	c, ok := Presets[name]
	if !ok {
		return Config{}, fmt.Errorf("no preset %q (have %s)", name, strings.Join(PresetNames(), ", "))
	}
	return c, nil
}

func (c Config) validate() error {
	switch {
	case c.Dim < 1 || c.Layers < 1 || c.Heads < 1 || c.FFN < 1 || c.MaxLen < 1 || c.WordDim < 1 || c.CharDim < 1 || c.CharFilters < 1:
		return fmt.Errorf("dim %d, layers %d, heads %d, ffn %d, max_len %d, word_dim %d, char_dim %d, char_filters %d: all must be positive",
			c.Dim, c.Layers, c.Heads, c.FFN, c.MaxLen, c.WordDim, c.CharDim, c.CharFilters)
	case c.Dim%c.Heads != 0:
		return fmt.Errorf("dim %d is not a multiple of heads %d", c.Dim, c.Heads)
	case c.Dropout < 0 || c.Dropout >= 1 || c.AttnDropout < 0 || c.AttnDropout >= 1:
		return fmt.Errorf("dropout %v, attn_dropout %v: want [0, 1)", c.Dropout, c.AttnDropout)
	}
	return nil
}
