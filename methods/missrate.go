package methods

import (
	"fmt"
	"slices"

	"github.com/nerflow/nerflow/eval"
	"github.com/nerflow/nerflow/pipeline/spec"
)

// Which miss rate suits a corpus is a property of its labels: doubting
// the labels' O (a rate above 0) adds the entities that labels of low
// recall miss, and the errors that labels of low precision make; AutoNER's
// 0 suits a dictionary whose gaps untyped phrases cover (BC5CDR's). A
// method that takes several rates trains its first step at each and lets
// the dev input choose (docs/autoner.md, docs/bond.md measured both kinds).

// candidateMissRates reads a method's list param miss_rate: each rate
// once, in the order given (the first is the fallback without a dev input;
// a later one wins a tie on dev). Without a dev input there is nothing to
// choose on: the default list falls back to its first rate, and a list
// given explicitly is an error.
func candidateMissRates(b *spec.Builder) []float64 {
	var rates []float64
	for _, r := range b.Params().Floats("miss_rate") {
		if !slices.Contains(rates, r) {
			rates = append(rates, r)
		}
	}
	switch {
	case len(rates) == 0:
		b.Errorf("params.miss_rate", "want at least one rate")
	case len(rates) > 1 && !b.Has("dev"):
		if b.IsSet("miss_rate") {
			b.Errorf("params.miss_rate", "several rates (%v) are candidates chosen on the dev input, which this spec does not give", rates)
		}
		rates = rates[:1]
	}
	return rates
}

// missRateFan sets the rates on node n, which trains at a miss rate: one
// rate as its param, several as a fan-out (one copy per rate). It returns
// the fan-out that pairs a later node with those copies (nil for one
// rate) and the copies' names, for bestOnDev and eval.select.
func missRateFan(n *spec.NodeBuilder, rates []float64) (fanout, []string) {
	if len(rates) == 1 {
		n.Set("miss_rate", rates[0])
		return nil, nil
	}
	vals := make([]any, len(rates))
	names := make([]string, len(rates))
	for i, r := range rates {
		vals[i] = r
		names[i] = fmt.Sprintf("miss_rate %g", r)
	}
	n.FanOut("miss_rate", vals...)
	return func(m *spec.NodeBuilder) *spec.NodeBuilder { return m.FanOut("miss_rate", vals...) }, names
}

// bestMissRate trains the tagger t at the candidate miss rates and
// returns the step that later nodes read the seeds' models from. One rate
// is t's param, and t that step. Several fan t out, and node select-STEP
// (t's name: autoner's variant, roster's noise) keeps, per seed, the rate
// whose tagger the dev input scores best (eval-STEP, per seed and rate).
func bestMissRate(b *spec.Builder, t *spec.NodeBuilder, rates []float64, seeds []int) *spec.NodeBuilder {
	if len(rates) < 2 {
		if len(rates) == 1 { // none: candidateMissRates reported it
			t.Set("miss_rate", rates[0])
		}
		return t
	}
	byRate, names := missRateFan(t, rates)
	bySeedAndRate := func(n *spec.NodeBuilder) *spec.NodeBuilder { return byRate(fanSeeds(n, seeds, false)) }
	return fanSeeds(b.Node("select-"+t.Name(), eval.StageSelect), seeds, false).
		Input("models", t.Out("model")).Input("reports", scoreDev(b, t, bySeedAndRate)).Set("names", names)
}
