package tagger

import (
	"fmt"

	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/stages"
)

// LossPartial is the partial-label CRF for distant labels: the negative log
// marginal likelihood of the observed labels, summing over the tag paths
// they allow, each weighted by how likely the labeler is to have written
// the labels given that path:
//
//	-log sum_y p(y | x) prod_t c(obs_t | y_t)
//
// c is the labeler's noise channel. An unmatched token is O evidence:
// c(O | O) = 1 and c(O | entity tag) = miss_rate, the chance that a real
// entity token went unmatched (1 minus the labels' recall); type_miss_rates
// sets it per type, for labels whose recall differs by type (CoNLL-2003's
// distant labels find 73-75% of PER and LOC tokens but 23% of MISC: one
// rate for all makes the model unlearn MISC). A match is taken as it is
// (c = 1 for its tag, 0 for any other; an unknown-type "?" match allows
// every entity tag), unless mistype_rates gives its type a rate: then
// c(match | another entity tag) is that rate, for labels that put the
// wrong type on real entities (CoNLL-2003's PER matches are a third
// wrong, mostly places and clubs). miss_rate 0 is the plain CRF on the
// labels; miss_rate 1 is the fully partial CRF (drop_o 1), where unmatched
// tokens say nothing and nothing keeps the model from tagging them all as
// entities. In between, the model tags an unmatched token as an entity
// only where its own evidence outweighs the labels' odds 1 : miss_rate for
// O, which is what lets it find the entities a small gazetteer misses
// without unlearning O.
const LossPartial = "partial"

func init() { RegisterLoss(LossPartial, partialLoss{}) }

// partialLoss owns its rates; ForLabels, which every trainer calls before
// the first step, turns them into the channel of its tag set, once.
type partialLoss struct {
	labelNoise
	channel *labelChannel
}

func (partialLoss) Doc() string {
	return "partial-label CRF: marginal likelihood of the distant labels, an unmatched token O with probability 1 - miss_rate (per type: type_miss_rates), a match of a type in mistype_rates possibly another type's entity"
}
func (partialLoss) Head() string { return CRFHead }
func (partialLoss) Soft() bool   { return false }

func (partialLoss) Params() []stages.Param { return labelNoiseParams() }

func (partialLoss) Configure(p stages.Params) (Loss, error) {
	n, err := configureLabelNoise(p)
	if err != nil {
		return nil, err
	}
	return partialLoss{labelNoise: n}, nil
}

// ForLabels binds the per-type rates to the tagger's tag set.
func (l partialLoss) ForLabels(labels *Labels) (Loss, error) {
	if err := l.rates.check(LossPartial, labels); err != nil {
		return nil, err
	}
	l.channel = newLabelChannel(labels.Tags, l.labelNoise)
	return l, nil
}

func (l partialLoss) Compute(lb *LossBatch) *ts.Tensor {
	ch := l.channel
	if ch == nil {
		panic("tagger: partial loss used before ForLabels bound it to a tag set")
	}
	if ch.certain {
		// O is certain and matches are sure: the CRF's own loss, which
		// scores a fully labeled batch by the gold path's score, not a
		// second forward pass.
		return crfLoss{}.Compute(lb)
	}
	gold := packedTargets(lb)
	w := lb.Head.(*crfWeightsOf)
	nll := crfMarginalNLL(lb.G, w.emissions(lb.G, lb.H), w.trans, w.start, w.end, lb.Batch, ch.evidence(gold), lb.K)
	return perSentence(lb, nll)
}

// labelChannel is the distant labeler's c(obs | y) by tag, as logs: miss[j]
// is log c(O | entity tag j), mistype[i] is log c(i | entity tag j) for an
// observed entity tag i and every other entity tag j (notAllowed: c = 0,
// a match of i is sure). Index 0 (O) is unused in both. certain says that
// it allows nothing but the labels (every rate 0).
type labelChannel struct {
	miss, mistype []float32
	certain       bool
}

// newLabelChannel builds the channel of n over tags, a Labels tag set (O,
// then the entity tags, by whose types the rates are looked up).
func newLabelChannel(tags []string, n labelNoise) *labelChannel {
	ch := &labelChannel{miss: make([]float32, len(tags)), mistype: make([]float32, len(tags)), certain: true}
	for j := 1; j < len(tags); j++ {
		t, err := corpus.ParseTag(tags[j])
		if err != nil {
			panic(fmt.Sprintf("tagger: tag set %v: %v", tags, err)) // NewLabels makes only valid tags
		}
		ch.miss[j] = logRate(n.missOf(t.Type))
		ch.mistype[j] = logRate(n.rates.mistype[t.Type]) // 0 when the type has none: sure
		ch.certain = ch.certain && ch.miss[j] == notAllowed && ch.mistype[j] == notAllowed
	}
	return ch
}

// evidence is log c(obs_t | y_t) for every token and tag ([len(gold)*k]):
// allowedTags' mask, except that an observed O allows each entity tag at
// its miss rate and a match of a tag with a mistype rate allows the other
// entity tags at that rate.
func (ch *labelChannel) evidence(gold []int64) []float32 {
	k := len(ch.miss)
	ev := allowedTags(gold, k)
	for p, y := range gold {
		switch {
		case y == 0:
			copy(ev[p*k+1:(p+1)*k], ch.miss[1:])
		case y > 0 && ch.mistype[y] != notAllowed:
			for j := 1; j < k; j++ {
				if j != int(y) {
					ev[p*k+j] = ch.mistype[y]
				}
			}
		}
	}
	return ev
}
