package tagger

import (
	"fmt"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/kit"
	"github.com/nerflow/nerflow/stages"
	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/ts"
)

// TieBreakHead is AutoNER's Tie-or-Break tagger (Shang et al., 2018): a
// binary classifier on every gap between two adjacent tokens says whether
// they are tied in one phrase or broken apart, z_t = a.h_t + c.h_t+1 + b0,
// p(tie) = sigmoid(z_t); the spans between predicted breaks are then typed
// by a classifier over O ("None") and the entity types on their boundary
// states [h_start; h_end-1]. Decoding is the spans from the breaks
// (p(tie) < 0.5), each given its most probable class. It is trained by
// LossTieBreak.
const TieBreakHead = "tiebreak"

// LossTieBreak trains the Tie-or-Break head on distant tags: the cross
// entropy of each gap's tie/break label plus that of each labeled span's
// class, both means over what the labels say. A gap is unknown, and left
// out, where either token is of unknown type ("?") or ignored: the labels
// say a "?" phrase is entity-like but not where it ends (AutoNER's rule
// for untyped high-quality phrases). A span is labeled where both its ends
// and every gap inside are known: a matched phrase (its type) or an
// unmatched token (O, the None class).
//
// With miss_rate (or type_miss_rates) above 0 the labels' O is partial
// evidence, as in loss partial: the span of an unmatched token may be an
// entity of a type at that type's miss rate, and the break between two
// unmatched tokens may be a tie (one missed entity) at miss_rate; a match
// of a type in mistype_rates may be a span of another type. Each term is
// then the negative log of the labels' likelihood through that channel
// (noisyCrossEntropy). AutoNER's Tie-or-Break, miss_rate 0, trusts a
// gazetteer of high recall; labels that miss a third of the entities
// (CoNLL-2003's) would teach it to leave them out.
const LossTieBreak = "tiebreak"

func init() {
	RegisterHead(TieBreakHead, tieBreakHead{})
	RegisterLoss(LossTieBreak, tieBreakLoss{})
}

type tieBreakHead struct{}

func (tieBreakHead) Doc() string {
	return "AutoNER's Tie-or-Break: a tie/break classifier between adjacent tokens, the spans between breaks typed (None or an entity type)"
}

func (tieBreakHead) NewWeights(p *kit.Initializer, in int, labels *Labels, _ Config) HeadWeights {
	rep, classes := 2*in, len(labels.Types)+1
	w := &tieBreakWeightsOf{
		labels: labels,
		gapW:   p.Uniform("tb_gap_w", 1/sqrt(rep), 1, rep), gapB: p.Uniform("tb_gap_b", 1/sqrt(rep), 1),
		typeW: p.Uniform("tb_type_w", 1/sqrt(rep), classes, rep), typeB: p.Uniform("tb_type_b", 1/sqrt(rep), classes),
	}
	w.classes = tagClasses(labels)
	return w
}

// tagClass is what a tag says about its token: its span class (0 O, 1... the
// entity types in Labels.Types order) and its scheme prefix.
type tagClass struct {
	typ    int
	prefix byte
}

// tagClasses is what each tag of labels says about its token.
func tagClasses(labels *Labels) []tagClass {
	classes := make([]tagClass, labels.NumTags())
	for c := 1; c < labels.NumTags(); c++ {
		t, err := labels.Scheme.ParseTag(labels.Tags[c])
		if err != nil {
			kit.Abort(fmt.Errorf("tie-or-break head: tag %q: %w", labels.Tags[c], err)) // the tag set's own tags parse
		}
		classes[c] = tagClass{typ: 1 + indexOf(labels.Types, t.Type), prefix: t.Prefix}
	}
	return classes
}

func indexOf(xs []string, x string) int {
	for i, y := range xs {
		if y == x {
			return i
		}
	}
	return -1
}

// tieBreakWeightsOf are the Tie-or-Break head's weights.
type tieBreakWeightsOf struct {
	labels       *Labels
	classes      []tagClass // by tag
	gapW, gapB   *ts.Tensor // [1, 2*in], [1]
	typeW, typeB *ts.Tensor // [classes, 2*in], [classes]
}

// pairLogits applies a linear layer to [h_left; h_right] for each pair of
// packed positions: [len(left), rows of w].
func pairLogits(g *kit.Graph, h *ts.Tensor, w, bias *ts.Tensor, left, right []int64) *ts.Tensor {
	n := int64(len(left))
	x := g.T(ts.Cat([]*ts.Tensor{g.T(h.IndexSelect(0, g.Ints(left, n), false)), g.T(h.IndexSelect(0, g.Ints(right, n), false))}, 1))
	return g.T(ts.Linear(x, w, bias))
}

// tieBreakTargets are the gap and span labels of a batch that the tags
// determine, in packed positions.
type tieBreakTargets struct {
	gapLeft, gapRight  []int64 // the gap between two tokens
	gapTie             []int64 // 1 tie, 0 break
	gapOpen            []bool  // a break between two unmatched tokens: a missed entity would tie them
	spanStart, spanEnd []int64 // first and last token of a span
	spanClass          []int64
}

// gapOf is the label of the gap between tokens whose targets are a and b:
// tie, break, or unknown (ok false).
func (w *tieBreakWeightsOf) gapOf(a, b int32) (tie, ok bool) {
	if a < 0 || b < 0 {
		return false, false // ignored or of unknown type
	}
	if a == 0 || b == 0 {
		return false, true
	}
	ca, cb := w.classes[a], w.classes[b]
	if ca.typ != cb.typ || ca.prefix == 'E' || ca.prefix == 'S' {
		return false, true
	}
	switch cb.prefix {
	case 'I', 'E':
		return true, true // continues a's entity (in IO, adjacent entities of a type are one)
	}
	return false, true
}

// targets reads the gap and span labels of every sentence of the batch from
// its tags.
func (w *tieBreakWeightsOf) targets(lb *LossBatch) tieBreakTargets {
	var tt tieBreakTargets
	for i, id := range lb.Batch.ids {
		ys := lb.exs[id].targets
		n := len(ys)
		// known[t] says whether the gap before token t is known (the
		// sentence's start and end are).
		known := make([]bool, n+1)
		tie := make([]bool, n+1)
		known[0], known[n] = true, true
		for t := 1; t < n; t++ {
			tie[t], known[t] = w.gapOf(ys[t-1], ys[t])
			if known[t] {
				tt.gapLeft = append(tt.gapLeft, int64(lb.Batch.pos(i, t-1)))
				tt.gapRight = append(tt.gapRight, int64(lb.Batch.pos(i, t)))
				y := int64(0)
				if tie[t] {
					y = 1
				}
				tt.gapTie = append(tt.gapTie, y)
				tt.gapOpen = append(tt.gapOpen, ys[t-1] == 0 && ys[t] == 0)
			}
		}
		for start := 0; start < n; {
			end, whole := start+1, known[start]
			for end < n && !(known[end] && !tie[end]) {
				whole = whole && known[end]
				end++
			}
			if whole && ys[start] >= 0 {
				tt.spanStart = append(tt.spanStart, int64(lb.Batch.pos(i, start)))
				tt.spanEnd = append(tt.spanEnd, int64(lb.Batch.pos(i, end-1)))
				tt.spanClass = append(tt.spanClass, int64(w.classes[ys[start]].typ))
			}
			start = end
		}
	}
	return tt
}

// tieBreakLoss owns its rates; ForLabels, which every trainer calls before
// the first step, turns them into the channel of its tag set, once.
type tieBreakLoss struct {
	labelNoise
	bound   bool
	channel *tieBreakChannel // nil: the labels are sure, plain cross entropy
}

func (tieBreakLoss) Doc() string {
	return "Tie-or-Break: cross entropy of the known gaps (tie or break) plus that of the labeled spans' classes (None or a type); gaps next to an unknown-type (?) token are left out; an unmatched token's span may be an entity at miss_rate (per type: type_miss_rates), as may the break between two unmatched tokens be a tie, and a match of a type in mistype_rates another type"
}
func (tieBreakLoss) Head() string { return TieBreakHead }
func (tieBreakLoss) Soft() bool   { return false }

func (tieBreakLoss) Params() []stages.Param { return labelNoiseParams() }

func (tieBreakLoss) Configure(p stages.Params) (Loss, error) {
	n, err := configureLabelNoise(p)
	if err != nil {
		return nil, err
	}
	return tieBreakLoss{labelNoise: n}, nil
}

// ForLabels binds the rates to the tagger's types.
func (l tieBreakLoss) ForLabels(labels *Labels) (Loss, error) {
	if err := l.rates.check(LossTieBreak, labels); err != nil {
		return nil, err
	}
	l.channel, l.bound = newTieBreakChannel(labels.Types, l.labelNoise), true
	return l, nil
}

func (l tieBreakLoss) Compute(lb *LossBatch) *ts.Tensor {
	if !l.bound {
		panic("tagger: tiebreak loss used before ForLabels bound it to a tag set")
	}
	w := lb.Head.(*tieBreakWeightsOf)
	return w.loss(lb.G, lb.H, w.targets(lb), l.channel)
}

// tieBreakChannel is the labeler's noise as the Tie-or-Break loss sees it:
// over the span classes (spans, nil when sure) and, as a log rate, the
// chance openTie that two adjacent unmatched tokens were one missed entity
// (notAllowed: a break between them is sure). The gap classifier has no
// types, so the gap takes miss_rate, not a type's.
type tieBreakChannel struct {
	spans   *spanChannel
	openTie float32
}

// newTieBreakChannel builds the channel of n over types, nil when every
// rate is 0.
func newTieBreakChannel(types []string, n labelNoise) *tieBreakChannel {
	miss := make(map[string]float64, len(types))
	for _, t := range types {
		miss[t] = n.missOf(t)
	}
	ch := &tieBreakChannel{spans: newSpanChannel(types, typedRates{miss: miss, mistype: n.rates.mistype}), openTie: logRate(n.missRate)}
	if ch.spans == nil && ch.openTie == notAllowed {
		return nil
	}
	return ch
}

// gapEvidence is log c(obs | break), log c(obs | tie) for every known gap
// ([2*len(gapTie)], break first as binaryLogits lays the classes out).
func (ch *tieBreakChannel) gapEvidence(tt tieBreakTargets) []float32 {
	ev := make([]float32, 0, 2*len(tt.gapTie))
	for i, y := range tt.gapTie {
		switch {
		case y == 1:
			ev = append(ev, notAllowed, 0)
		case tt.gapOpen[i]:
			ev = append(ev, 0, ch.openTie)
		default:
			ev = append(ev, 0, notAllowed)
		}
	}
	return ev
}

// loss is the mean negative log-likelihood of the known gaps plus that of
// the labeled spans (a term without rows is left out), through ch where it
// is not nil (cross entropy where it is); nil when there are neither.
func (w *tieBreakWeightsOf) loss(g *kit.Graph, h *ts.Tensor, tt tieBreakTargets, ch *tieBreakChannel) *ts.Tensor {
	var terms []*ts.Tensor
	if n := len(tt.gapTie); n > 0 {
		z := binaryLogits(g, pairLogits(g, h, w.gapW, w.gapB, tt.gapLeft, tt.gapRight))
		if ch == nil || ch.openTie == notAllowed {
			terms = append(terms, crossEntropy(g, z, tt.gapTie, ones(n)))
		} else {
			terms = append(terms, noisyCrossEntropy(g, z, ch.gapEvidence(tt), ones(n)))
		}
	}
	if n := len(tt.spanClass); n > 0 {
		z := pairLogits(g, h, w.typeW, w.typeB, tt.spanStart, tt.spanEnd)
		if ch == nil || ch.spans == nil {
			terms = append(terms, crossEntropy(g, z, tt.spanClass, ones(n)))
		} else {
			terms = append(terms, noisyCrossEntropy(g, z, spanEvidence(ch.spans, tt.spanClass, len(ch.spans.rows)), ones(n)))
		}
	}
	switch len(terms) {
	case 0:
		return nil
	case 1:
		return terms[0]
	}
	return g.T(terms[0].Add(terms[1], false))
}

// probabilities decodes every sentence: spans from the gaps whose p(tie) is
// under 0.5, each span's class distribution from the type classifier, put
// on each of its tokens' tags (O on O; a type on the tag the token has at
// its place in the span). The paths are the spans of a class other than O.
func (w *tieBreakWeightsOf) Probabilities(g *kit.Graph, h *ts.Tensor, b *Batch, k int) (probs []float32, paths [][]int) {
	var left, right []int64
	for i := range b.ids {
		for t := 1; t < sentenceLen(b, i); t++ {
			left, right = append(left, int64(b.pos(i, t-1))), append(right, int64(b.pos(i, t)))
		}
	}
	var pTie []float32
	if len(left) > 0 {
		pTie = kit.Float32s(g.T(pairLogits(g, h, w.gapW, w.gapB, left, right).Sigmoid(false)))
	}
	type span struct{ sent, start, end int }
	var spans []span
	var starts, ends []int64
	gap := 0
	for i := range b.ids {
		n := sentenceLen(b, i)
		start := 0
		for t := 1; t <= n; t++ {
			if t < n {
				tie := pTie[gap] >= 0.5
				gap++
				if tie {
					continue
				}
			}
			spans = append(spans, span{i, start, t})
			starts, ends = append(starts, int64(b.pos(i, start))), append(ends, int64(b.pos(i, t-1)))
			start = t
		}
	}
	c := len(w.labels.Types) + 1
	dist := kit.Float32s(g.T(pairLogits(g, h, w.typeW, w.typeB, starts, ends).Softmax(1, gotch.Float, false)))
	probs = make([]float32, b.n*k)
	paths = make([][]int, len(b.ids))
	entities := make([][]corpus.Span, len(b.ids))
	for s, sp := range spans {
		q := dist[s*c : (s+1)*c]
		for t := sp.start; t < sp.end; t++ {
			row := probs[b.pos(sp.sent, t)*k : (b.pos(sp.sent, t)+1)*k]
			row[0] += q[0]
			for j, typ := range w.labels.Types {
				idx, _ := w.labels.Index(tagAt(w.labels.Scheme, typ, t-sp.start, sp.end-sp.start))
				row[idx] += q[j+1]
			}
		}
		if best := argmax(q); best != 0 {
			entities[sp.sent] = append(entities[sp.sent], corpus.Span{Start: sp.start, End: sp.end, Label: w.labels.Types[best-1]})
		}
	}
	for i := range b.ids {
		n := sentenceLen(b, i)
		tags, err := w.labels.Scheme.Tags(entities[i], n, corpus.MergeAdjacent())
		if err != nil {
			kit.Abort(err) // the spans are disjoint and in order
		}
		paths[i] = make([]int, n)
		for t, tag := range tags {
			paths[i][t], _ = w.labels.Index(tag)
		}
	}
	return probs, paths
}
