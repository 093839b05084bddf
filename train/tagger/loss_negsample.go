package tagger

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/kit"
	"github.com/nerflow/nerflow/stages"
)

// LossNegSample is span-based negative sampling for missing annotations
// (Li et al. 2021) on the span head: cross entropy over the annotated spans
// of a sentence (positives) and ceil(neg_ratio * n) spans drawn, for a
// sentence of n tokens, from its unannotated spans of at most MaxSpan
// tokens (negatives, class O). Unannotated entities are rarely drawn, so
// the classifier is seldom told they are O. A span of unknown type "?"
// (kept by unknown_as_entity) is a positive of any entity class:
// -log(1 - p(O)).
//
// SamplingUniform draws the negatives uniformly. SamplingWeighted draws
// them from e = softmax(r / T), r = u * (1 + v)^mu over the candidates,
// from the model's own scores at the step, without gradient: u is the
// entropy of the span's class distribution and v = z_O - max_l z_l the
// margin of its O logit over the best entity logit, so spans the model
// already finds confidently O but is still unsure of are favoured, and
// likely entities avoided. T = sqrt(C - c) falls over the C epochs (c the
// epochs done), sharpening the distribution as the model improves.
//
// type_miss_rates and mistype_rates put the labeler's noise by type into
// both terms, as loss partial does for the CRF: a drawn negative's loss is
// -log(p(O) + sum_T m_T p(T)), m_T the chance that an entity of type T went
// unlabeled, so a negative that the model finds to be, say, MISC where the
// labels find a fifth of MISC costs little; an annotated span of type T
// has -log(p(T) + r_T sum_{U != T} p(U)), r_T the chance that a label of T
// sits on another type's entity. O stays ruled out for an annotated span.
// Types without a rate keep the paper's loss: sampling already makes a
// missed entity a rare negative.
const LossNegSample = "negsample"

// The samplings of LossNegSample.
const (
	SamplingUniform  = "uniform"
	SamplingWeighted = "weighted"
)

var samplings = []string{SamplingUniform, SamplingWeighted}

func init() { RegisterLoss(LossNegSample, negSampleLoss{}) }

// negSampleLoss owns how negatives are drawn and the labeler's noise by
// type, which ForLabels binds to the tagger's classes.
type negSampleLoss struct {
	sampling string  // SamplingUniform or SamplingWeighted
	negRatio float64 // ceil(negRatio * length) negatives per sentence
	mu       float64 // the weighted draw's exponent of the O margin
	rates    typedRates
	channel  *spanChannel // nil: every label sure, plain cross entropy
}

func (negSampleLoss) Doc() string {
	return "cross entropy on the annotated spans and on ceil(neg_ratio * n) negatives per sentence drawn from the unannotated ones (sampling uniform or weighted)"
}
func (negSampleLoss) Head() string { return SpanHead }
func (negSampleLoss) Soft() bool   { return false }

func (negSampleLoss) Params() []stages.Param {
	return append([]stages.Param{
		stages.StringParam("sampling", SamplingUniform, "loss negsample: how negatives are drawn from the unannotated spans, uniform (Li et al. 2021) or weighted (by the model's uncertainty and O margin)", stages.OneOf(samplings...)),
		stages.FloatParam("neg_ratio", 0.35, "loss negsample: negatives per sentence, ceil(neg_ratio * sentence length) (lambda)", stages.Range(0.01, 10)),
		stages.FloatParam("mu", 8, "loss negsample, weighted: exponent of the O margin in the weights, u * (1 + v)^mu", stages.Range(0, 64)),
	}, typedRateParams()...)
}

// Configure checks the per-type rates; the declarations' choices and
// ranges keep every other value valid.
func (negSampleLoss) Configure(p stages.Params) (Loss, error) {
	rates, err := configureTypedRates(p)
	if err != nil {
		return nil, err
	}
	return negSampleLoss{sampling: p.String("sampling"), negRatio: p.Float("neg_ratio"), mu: p.Float("mu"), rates: rates}, nil
}

// ForLabels binds the per-type rates to the tagger's span classes.
func (l negSampleLoss) ForLabels(labels *Labels) (Loss, error) {
	if err := l.rates.check(LossNegSample, labels); err != nil {
		return nil, err
	}
	l.channel = newSpanChannel(labels.Types, l.rates)
	return l, nil
}

// spanChannel is the labeler's noise over the span classes (O, then 1 +
// the index of each type), built once per tagger: rows[y] is log c(y |
// k) for every class k, the evidence of a row observed as class y (0: a
// drawn negative; notAllowed where c = 0).
type spanChannel struct {
	rows [][]float32
}

// newSpanChannel builds the channel of types, or nil when every rate is 0
// (the labels are sure, and the loss is cross entropy). A negative may be
// class k at k's miss rate; an annotated span of class y may be another
// entity class at y's mistype rate, never O.
func newSpanChannel(types []string, r typedRates) *spanChannel {
	c := len(types) + 1
	ch := &spanChannel{rows: make([][]float32, c)}
	sure := true
	for y := range c {
		row := make([]float32, c)
		for k := range row {
			switch {
			case k == y:
			case y == 0:
				row[k] = logRate(r.miss[types[k-1]])
			case k == 0:
				row[k] = notAllowed
			default:
				row[k] = logRate(r.mistype[types[y-1]])
			}
			sure = sure && (k == y || row[k] == notAllowed)
		}
		ch.rows[y] = row
	}
	if sure {
		return nil
	}
	return ch
}

// evidence is log c(obs | k) for every class k of a row whose observed
// class is target (0: a drawn negative). The row is shared: read only.
func (ch *spanChannel) evidence(target int64) []float32 { return ch.rows[target] }

// anyEntityClass is the target of a span of unknown type: any entity
// class, never O.
const anyEntityClass int64 = -1

// spanEvidence lays out the evidence of rows observed as targets, row by
// row ([len(targets)*classes]), as noisyCrossEntropy takes it: the
// channel's row of a class (one-hot with no channel), and for
// anyEntityClass every entity class at once, so that the row's loss is
// -log(1 - p(O)), as the partial-label CRF marginalizes an entity of
// unknown type over the entity tags.
func spanEvidence(ch *spanChannel, targets []int64, classes int) []float32 {
	ev := make([]float32, 0, len(targets)*classes)
	for _, y := range targets {
		switch {
		case y == anyEntityClass:
			ev = append(ev, notAllowed)
			ev = append(ev, make([]float32, classes-1)...)
		case ch != nil:
			ev = append(ev, ch.rows[y]...)
		default:
			for k := range classes {
				if int64(k) == y {
					ev = append(ev, 0)
				} else {
					ev = append(ev, notAllowed)
				}
			}
		}
	}
	return ev
}

// unknownSpans returns an example's entities of unknown type: each run of
// anyEntity targets (present where the trainer keeps them,
// unknown_as_entity). A run reads as one entity, as IO reads it.
func unknownSpans(targets []int32) []corpus.Span {
	var out []corpus.Span
	for t := 0; t < len(targets); {
		if targets[t] != anyEntity {
			t++
			continue
		}
		start := t
		for t < len(targets) && targets[t] == anyEntity {
			t++
		}
		out = append(out, corpus.Span{Start: start, End: t, Label: corpus.UnknownType})
	}
	return out
}

// sampling is the state of negative sampling in one epoch: its draws and
// what they drew.
type sampling struct {
	epoch, epochs int // 1-based epoch
	rng           *rand.Rand
	// negatives counts the spans drawn; missampled those of them that are
	// entities of the complete annotation (WithCompleteAnnotation).
	negatives, missampled int
}

// temperature is T = sqrt(C - c) of the weighted sampling in epoch (1-based)
// of epochs: c counts the epochs done, so T falls from sqrt(C) in the first
// epoch to 1 in the last, never 0.
func temperature(epoch, epochs int) float64 { return math.Sqrt(float64(epochs - epoch + 1)) }

// negativeWeights is the distribution e = softmax(r / T) of the weighted
// sampling over candidate spans, given each span's logits (O first):
// r = u * max(0, 1 + v)^mu, u the entropy (nats) of softmax(z), v = z_O -
// max_l z_l. 1 + v is floored at 0: with logits, v falls below -1 on spans
// the model thinks are entities, where an even mu would otherwise make
// them the likeliest negatives.
func negativeWeights(logits [][]float32, mu, temp float64) []float64 {
	r := make([]float64, len(logits))
	for i, z := range logits {
		zmax := float64(slices.Max(z))
		var norm float64
		for _, x := range z {
			norm += math.Exp(float64(x) - zmax)
		}
		var u float64
		for _, x := range z {
			lp := float64(x) - zmax - math.Log(norm)
			u -= math.Exp(lp) * lp
		}
		v := float64(z[0]) - float64(slices.Max(z[1:]))
		r[i] = u * math.Pow(max(0, 1+v), mu)
	}
	return softmax(r, temp)
}

// softmax returns softmax(x / temp).
func softmax(x []float64, temp float64) []float64 {
	out := make([]float64, len(x))
	if len(x) == 0 {
		return out
	}
	top := slices.Max(x)
	var sum float64
	for i, v := range x {
		out[i] = math.Exp((v - top) / temp)
		sum += out[i]
	}
	for i := range out {
		out[i] /= sum
	}
	return out
}

// drawWithout draws k distinct indices of [0, n) without replacement:
// uniformly when weights is nil, else each draw in proportion to the
// weights of the indices not drawn yet (uniformly among them if those
// weights sum to 0). k >= n draws them all, in order.
func drawWithout(rng *rand.Rand, n, k int, weights []float64) []int {
	left := make([]int, n)
	for i := range left {
		left[i] = i
	}
	if k >= n {
		return left
	}
	out := make([]int, 0, k)
	for range k {
		at := -1
		if weights != nil {
			var total float64
			for _, i := range left {
				total += weights[i]
			}
			if total > 0 {
				x := rng.Float64() * total
				for at = 0; at < len(left)-1 && x >= weights[left[at]]; at++ {
					x -= weights[left[at]]
				}
			}
		}
		if at < 0 {
			at = rng.IntN(len(left))
		}
		out = append(out, left[at])
		left = slices.Delete(left, at, at+1)
	}
	return out
}

// annotated reads an example's targets as spans: the annotated entities
// (positives, by class: 1 + the index of their type) and the tokens that
// may lie in no negative, because the loss ignores them (an entity of
// unknown type, a dropped O).
func annotated(targets []int32, labels *Labels) (positives []corpus.Span, blocked []bool) {
	tags := make([]string, len(targets))
	blocked = make([]bool, len(targets))
	for t, y := range targets {
		tags[t] = corpus.Outside
		if y < 0 {
			blocked[t] = true
		} else {
			tags[t] = labels.Tags[y]
		}
	}
	spans, err := labels.Scheme.Spans(tags)
	if err != nil {
		kit.Abort(err) // encoded targets are tags of the tag set
	}
	return spans, blocked
}

// compute is the loss of a batch: cross entropy over the positives and the
// drawn negatives of its sentences, each span one row.
func (l negSampleLoss) Compute(lb *LossBatch) *ts.Tensor {
	w := lb.Head.(*spanWeightsOf)
	s := lb.sampling
	classOf := make(map[string]int64, len(w.labels.Types))
	for i, typ := range w.labels.Types {
		classOf[typ] = int64(i + 1)
	}
	var rows []spanRef
	var targets []int64
	var pools [][]spanRef // per sentence of the batch, its candidate negatives
	for i, id := range lb.Batch.ids {
		e := &lb.exs[id]
		positives, blocked := annotated(e.targets, w.labels)
		for _, p := range positives {
			rows = append(rows, spanRef{i, p.Start, p.End})
			targets = append(targets, classOf[p.Label])
		}
		// An entity of unknown type (a capitalized phrase no gazetteer
		// typed) is a positive of whichever type the model gives it; its
		// tokens are blocked, so no negative overlaps it either.
		for _, u := range unknownSpans(e.targets) {
			rows = append(rows, spanRef{i, u.Start, u.End})
			targets = append(targets, anyEntityClass)
		}
		var pool []spanRef
		for _, c := range candidates(i, e.len(), w.maxSpan) {
			if !slices.Contains(blocked[c.start:c.end], true) &&
				!slices.ContainsFunc(positives, func(p corpus.Span) bool { return p.Start == c.start && p.End == c.end }) {
				pool = append(pool, c)
			}
		}
		pools = append(pools, pool)
	}
	var weights [][]float64
	if l.sampling == SamplingWeighted {
		weights = w.samplingWeights(lb, pools, l.mu)
	}
	for i, id := range lb.Batch.ids {
		e := &lb.exs[id]
		k := int(math.Ceil(l.negRatio * float64(e.len())))
		var wi []float64
		if weights != nil {
			wi = weights[i]
		}
		for _, j := range drawWithout(s.rng, len(pools[i]), k, wi) {
			c := pools[i][j]
			rows = append(rows, c)
			targets = append(targets, 0)
			s.negatives++
			if slices.ContainsFunc(e.complete, func(p corpus.Span) bool { return p.Start == c.start && p.End == c.end }) {
				s.missampled++
			}
		}
	}
	if len(rows) == 0 {
		return nil
	}
	ones := make([]float32, len(rows))
	for i := range ones {
		ones[i] = 1
	}
	logits := w.logits(lb.G, lb.H, lb.Batch, rows)
	if l.channel == nil && !slices.Contains(targets, anyEntityClass) {
		return crossEntropy(lb.G, logits, targets, ones)
	}
	return noisyCrossEntropy(lb.G, logits, spanEvidence(l.channel, targets, len(w.labels.Types)+1), ones)
}

// samplingWeights scores each sentence's candidate negatives with the
// model of the step, without gradient, and returns their distributions
// for the weighted draw.
func (w *spanWeightsOf) samplingWeights(lb *LossBatch, pools [][]spanRef, mu float64) [][]float64 {
	var all []spanRef
	for _, p := range pools {
		all = append(all, p...)
	}
	if len(all) == 0 {
		return make([][]float64, len(pools))
	}
	var z []float32
	kit.NoGrad(func() { z = kit.Float32s(w.logits(lb.G, lb.H, lb.Batch, all)) })
	c := len(w.labels.Types) + 1
	temp := temperature(lb.sampling.epoch, lb.sampling.epochs)
	out := make([][]float64, len(pools))
	at := 0
	for i, p := range pools {
		logits := make([][]float32, len(p))
		for j := range p {
			logits[j] = z[(at+j)*c : (at+j+1)*c]
		}
		at += len(p)
		out[i] = negativeWeights(logits, mu, temp)
	}
	return out
}
