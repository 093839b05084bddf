package tagger

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/nerflow/nerflow/stages"
)

// typedRates is the distant labeler's noise by entity type, as the losses
// that model it (partial, negsample) take it: how often it misses an
// entity of a type, and how often its matches of a type are really
// another type's entities. Both losses declare the same two parameters,
// so that a method passes them to either head alike.
type typedRates struct {
	miss, mistype map[string]float64 // by type; a type not named has none
}

// labelNoise is the labeler's noise as the losses that read miss_rate
// take it (partial, tiebreak): the chance that an entity went unmatched,
// and the rates by type.
type labelNoise struct {
	missRate float64
	rates    typedRates
}

// labelNoiseParams declares miss_rate and the per-type rates, once for the
// losses that read them (parameters are global by name).
func labelNoiseParams() []stages.Param {
	return append([]stages.Param{
		stages.FloatParam("miss_rate", 0.5, "losses partial and tiebreak: the probability that an entity token was left O by the distant labels (1 - their recall); 0: O is certain, 1: O says nothing", stages.Range(0, 1)),
	}, typedRateParams()...)
}

// missOf is the chance that an entity of typ went unmatched: its own rate
// in type_miss_rates, else miss_rate.
func (n labelNoise) missOf(typ string) float64 {
	if rate, ok := n.rates.miss[typ]; ok {
		return rate
	}
	return n.missRate
}

// configureLabelNoise reads labelNoiseParams.
func configureLabelNoise(p stages.Params) (labelNoise, error) {
	rates, err := configureTypedRates(p)
	return labelNoise{missRate: p.Float("miss_rate"), rates: rates}, err
}

// typedRateParams declares type_miss_rates and mistype_rates, once for the
// losses that share them (parameters are global by name).
func typedRateParams() []stages.Param {
	return []stages.Param{
		stages.StringListParam("type_miss_rates", nil, "losses partial, tiebreak and negsample: TYPE=RATE, the probability that an entity of TYPE went unlabeled, for labels whose recall differs by type (e.g. MISC=0.8 where the labels find a fifth of MISC); the types not named keep miss_rate (partial, tiebreak) or are never missed (negsample, whose sampling already makes a missed entity a rare negative). Labels whose unknown-type \"?\" entities, learned as entities (unknown_as_entity), already cover a type's gaps need no rate for it (docs/autoner.md, \"The capitalized phrases on CoNLL-2003\")"),
		stages.StringListParam("mistype_rates", nil, "losses partial, tiebreak and negsample: TYPE=RATE, the probability, relative to the label being right, that a label of TYPE is on another entity tag (partial: another type, or another part of a name; tiebreak and negsample: a span of another type): for labels that put TYPE on other types' entities (e.g. PER=0.1); the other types' labels are sure"),
	}
}

// configureTypedRates reads the two parameters.
func configureTypedRates(p stages.Params) (typedRates, error) {
	miss, err := typeRates("type_miss_rates", p.Strings("type_miss_rates"))
	if err != nil {
		return typedRates{}, err
	}
	mistype, err := typeRates("mistype_rates", p.Strings("mistype_rates"))
	if err != nil {
		return typedRates{}, err
	}
	return typedRates{miss: miss, mistype: mistype}, nil
}

// typeRates reads TYPE=RATE items, each rate in [0, 1] and each type once.
func typeRates(name string, items []string) (map[string]float64, error) {
	if len(items) == 0 {
		return nil, nil
	}
	rates := make(map[string]float64, len(items))
	for _, item := range items {
		typ, v, ok := strings.Cut(item, "=")
		typ = strings.TrimSpace(typ)
		if !ok || typ == "" {
			return nil, fmt.Errorf("%s: %q: want TYPE=RATE", name, item)
		}
		rate, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || rate < 0 || rate > 1 {
			return nil, fmt.Errorf("%s: %q: the rate must be a number in [0, 1]", name, item)
		}
		if _, dup := rates[typ]; dup {
			return nil, fmt.Errorf("%s: type %s given twice", name, typ)
		}
		rates[typ] = rate
	}
	return rates, nil
}

// logRate is a channel probability as the losses add it to log scores:
// notAllowed for 0, a label the rate does not allow.
func logRate(rate float64) float32 {
	if rate <= 0 {
		return notAllowed
	}
	return float32(math.Log(rate))
}

// check refuses a type the tagger does not have: a misspelt type would
// otherwise be silently ignored.
func (r typedRates) check(loss string, labels *Labels) error {
	for _, set := range []struct {
		name  string
		rates map[string]float64
	}{{"type_miss_rates", r.miss}, {"mistype_rates", r.mistype}} {
		for _, typ := range slices.Sorted(maps.Keys(set.rates)) { // the first bad type, the same every run
			if !slices.Contains(labels.Types, typ) {
				return fmt.Errorf("loss %s: %s names type %s, which the tagger does not have (its types: %s)", loss, set.name, typ, strings.Join(labels.Types, ", "))
			}
		}
	}
	return nil
}
