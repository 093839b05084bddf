package tagger

import (
	"cmp"
	"slices"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/kit"
)

// SpanHead is a span classifier (Li et al. 2021): every span of at most
// Config.MaxSpan tokens is represented by its boundary states,
// [h_i; h_j; h_i - h_j; h_i * h_j], and an MLP scores it over O and the
// entity types. Decoding keeps the spans whose best class is not O, best
// score first, skipping those that overlap a span already kept. It is
// trained by LossNegSample.
const SpanHead = "span"

func init() { RegisterHead(SpanHead, spanHead{}) }

type spanHead struct{}

func (spanHead) Doc() string {
	return "span classifier over boundary states, decoded greedily into non-overlapping spans"
}

func (spanHead) NewWeights(p *kit.Initializer, in int, labels *Labels, cfg Config) HeadWeights {
	rep, hid, classes := 4*in, in, len(labels.Types)+1
	return &spanWeightsOf{
		labels: labels, maxSpan: cfg.MaxSpan,
		w1: p.Uniform("span_w1", 1/sqrt(rep), hid, rep), b1: p.Uniform("span_b1", 1/sqrt(rep), hid),
		w2: p.Uniform("span_w2", 1/sqrt(hid), classes, hid), b2: p.Uniform("span_b2", 1/sqrt(hid), classes),
	}
}

// spanWeightsOf are the span head's weights. Its classes are O (0) and the
// entity types in Labels.Types order (1...).
type spanWeightsOf struct {
	labels  *Labels
	maxSpan int
	w1, b1  *ts.Tensor
	w2, b2  *ts.Tensor
}

// spanRef is a span [start, end) of the sent-th sentence of a batch.
type spanRef struct{ sent, start, end int }

// logits scores spans of batch b from the encoder output h: [len(spans),
// classes]. The first layer of the MLP on [h_i; h_j; h_i - h_j; h_i * h_j],
// W = [A B C D], is computed as (A + C) h_i + (B - C) h_j + D (h_i * h_j):
// the first two terms once per token rather than once per span (a token
// starts and ends up to max_span candidates each), which makes scoring every
// candidate, as decoding and the weighted sampling do, several times faster.
func (w *spanWeightsOf) logits(g *kit.Graph, h *ts.Tensor, b *Batch, spans []spanRef) *ts.Tensor {
	m := int64(len(spans))
	starts, ends := make([]int64, m), make([]int64, m)
	for k, s := range spans {
		starts[k], ends[k] = int64(b.pos(s.sent, s.start)), int64(b.pos(s.sent, s.end-1))
	}
	size, err := h.Size()
	g.Check(err)
	in := size[1]
	part := func(k int64) *ts.Tensor { return g.T(w.w1.Narrow(1, k*in, in, false)) }
	a, bw, c, d := part(0), part(1), part(2), part(3)
	atStart := g.T(ts.Linear(h, g.T(a.Add(c, false)), w.b1))       // [tokens, hid], with the bias
	atEnd := g.T(h.Mm(g.T(g.T(bw.Sub(c, false)).T(false)), false)) // [tokens, hid]
	si, ei := g.Ints(starts, m), g.Ints(ends, m)
	hs := g.T(h.IndexSelect(0, si, false))
	he := g.T(h.IndexSelect(0, ei, false))
	x := g.T(g.T(hs.Mul(he, false)).Mm(g.T(d.T(false)), false))
	x = g.T(x.Add(g.T(atStart.IndexSelect(0, si, false)), false))
	x = g.T(x.Add(g.T(atEnd.IndexSelect(0, ei, false)), false))
	return g.T(ts.Linear(g.T(x.Relu(false)), w.w2, w.b2))
}

// candidates lists the spans of sentence sent (n tokens) of at most
// maxSpan tokens, by start then length.
func candidates(sent, n, maxSpan int) []spanRef {
	var out []spanRef
	for i := range n {
		for j := i + 1; j <= min(n, i+maxSpan); j++ {
			out = append(out, spanRef{sent, i, j})
		}
	}
	return out
}

// sentenceLen is the number of tokens of the i-th sentence of b.
func sentenceLen(b *Batch, i int) int {
	n := 0
	for n < len(b.batchSizes) && int(b.batchSizes[n]) > i {
		n++
	}
	return n
}

// probabilities decodes every sentence of b into spans and returns them
// as tag paths. A token's distribution over the tag set is the class
// distribution of the decoded span it lies in, or else of its own one-token
// span, each class put on the tag it would have at the token's place in
// that span (O on O): the tags come from the decoded spans, not from the
// argmax of these rows.
func (w *spanWeightsOf) Probabilities(g *kit.Graph, h *ts.Tensor, b *Batch, k int) (probs []float32, paths [][]int) {
	var spans []spanRef
	for i := range b.ids {
		spans = append(spans, candidates(i, sentenceLen(b, i), w.maxSpan)...)
	}
	c := len(w.labels.Types) + 1
	dist := kit.Float32s(g.T(w.logits(g, h, b, spans).Softmax(1, gotch.Float, false)))
	probs = make([]float32, b.n*k)
	at := 0
	for i := range b.ids {
		n := sentenceLen(b, i)
		var scored []scoredSpan
		single := make([][]float32, n) // one-token span of each token
		first := at
		for ; at < len(spans) && spans[at].sent == i; at++ {
			s, q := spans[at], dist[at*c:(at+1)*c]
			if s.end-s.start == 1 {
				single[s.start] = q
			}
			if best := argmax(q); best != 0 {
				scored = append(scored, scoredSpan{corpus.Span{Start: s.start, End: s.end, Label: w.labels.Types[best-1]}, q[best]})
			}
		}
		kept := decodeSpans(scored)
		path := make([]int, n)
		for t := range n {
			w.spreadRow(probs[b.pos(i, t)*k:(b.pos(i, t)+1)*k], single[t], 0, 1)
		}
		for _, s := range kept {
			q := dist[(first+spanIndex(s.Start, s.End, n, w.maxSpan))*c:]
			for t := s.Start; t < s.End; t++ {
				row := probs[b.pos(i, t)*k : (b.pos(i, t)+1)*k]
				clear(row)
				w.spreadRow(row, q[:c], t-s.Start, s.End-s.Start)
			}
		}
		tags, err := w.labels.Scheme.Tags(kept, n, corpus.MergeAdjacent())
		if err != nil {
			kit.Abort(err) // decodeSpans returns valid, disjoint spans
		}
		for t, tag := range tags {
			path[t], _ = w.labels.Index(tag)
		}
		paths = append(paths, path)
	}
	return probs, paths
}

// spanIndex is the position of span [start, end) in candidates(_, n,
// maxSpan).
func spanIndex(start, end, n, maxSpan int) int {
	idx := 0
	for i := range start {
		idx += min(n, i+maxSpan) - i
	}
	return idx + end - start - 1
}

// spreadRow puts the class distribution q of a span of length tokens on
// the tags of its token at offset.
func (w *spanWeightsOf) spreadRow(row, q []float32, offset, length int) {
	row[0] += q[0]
	for c, typ := range w.labels.Types {
		idx, _ := w.labels.Index(tagAt(w.labels.Scheme, typ, offset, length))
		row[idx] += q[c+1]
	}
}

// tagAt is the tag of the token at offset in an entity of length tokens.
func tagAt(scheme corpus.Scheme, typ string, offset, length int) string {
	prefix := "I-"
	switch {
	case scheme == corpus.BIOES && length == 1:
		prefix = "S-"
	case scheme == corpus.BIOES && offset == length-1:
		prefix = "E-"
	case (scheme == corpus.BIO || scheme == corpus.BIOES) && offset == 0:
		prefix = "B-"
	}
	return prefix + typ
}

// scoredSpan is a span predicted as an entity, with the probability of its
// type.
type scoredSpan struct {
	corpus.Span
	score float32
}

// decodeSpans keeps, best score first, each span that overlaps no span
// already kept, and returns the kept spans by start. Ties go to the
// earlier, then the shorter span, so decoding is deterministic.
func decodeSpans(cands []scoredSpan) []corpus.Span {
	sorted := slices.Clone(cands)
	slices.SortStableFunc(sorted, func(a, b scoredSpan) int {
		return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(a.Start, b.Start), cmp.Compare(a.End, b.End))
	})
	var kept []corpus.Span
	for _, c := range sorted {
		if !slices.ContainsFunc(kept, func(k corpus.Span) bool { return c.Start < k.End && k.Start < c.End }) {
			kept = append(kept, c.Span)
		}
	}
	slices.SortFunc(kept, func(a, b corpus.Span) int { return cmp.Compare(a.Start, b.Start) })
	return kept
}
