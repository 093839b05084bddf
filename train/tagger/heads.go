package tagger

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/kit"
)

// Head is the output layer of a tagger, a named implementation registered
// with RegisterHead: a new head is one file, in this package or another,
// that implements it and registers itself in init (see head_token.go,
// head_crf.go, and plugin_test.go for one outside the package).
type Head interface {
	// Doc says what the head is, for the stage docs.
	Doc() string
	// NewWeights creates the head's weights for the tagger's tag set on
	// encoder output of size in, from the tagger's seeded initializer;
	// their names are those of the checkpoint. cfg is the tagger's
	// architecture (a head may have settings there, as the span head's
	// MaxSpan).
	NewWeights(p *kit.Initializer, in int, labels *Labels, cfg Config) HeadWeights
}

// HeadWeights are a head's weights in one tagger.
type HeadWeights interface {
	// Probabilities returns, for every token of b in packed order, its
	// distribution over the k tags ([b.Tokens()*k]), and, for a head that
	// decodes whole sentences, the best path of each sentence of b (nil:
	// the best tags are the argmax of each distribution). Inside kit.Guard.
	Probabilities(g *kit.Graph, h *ts.Tensor, b *Batch, k int) (probs []float32, paths [][]int)
}

// TokenOutputs is a head that scores each token on its own, as the token
// head does: type logits [tokens, K-1] and entity-vs-O logits [tokens, 2]
// on encoder output h. The losses of such heads read them through
// LossBatch.TokenOutputs, whatever the head.
type TokenOutputs interface {
	Outputs(g *kit.Graph, h *ts.Tensor) (typ, entity *ts.Tensor)
}

var heads = newNamed[Head]("head")

// RegisterHead makes a head available under name (the param head of
// train.tagger); it panics on a duplicate, as stage registration does.
func RegisterHead(name string, h Head) { heads.register(name, h) }

// HeadNames lists the registered heads.
func HeadNames() []string { return heads.names() }

func lookupHead(name string) (Head, error) { return heads.lookup(name) }

// named is a registry of plug-ins of one kind by name.
type named[T any] struct {
	kind string
	m    map[string]T
}

func newNamed[T any](kind string) *named[T] { return &named[T]{kind: kind, m: map[string]T{}} }

func (r *named[T]) register(name string, v T) {
	if _, dup := r.m[name]; dup {
		panic("train: " + r.kind + " " + name + " registered twice")
	}
	r.m[name] = v
}

func (r *named[T]) names() []string {
	keys := make([]string, 0, len(r.m))
	for k := range r.m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func (r *named[T]) lookup(name string) (T, error) {
	v, ok := r.m[name]
	if !ok {
		return v, fmt.Errorf("%s %q: want one of %s", r.kind, name, strings.Join(r.names(), ", "))
	}
	return v, nil
}

// sentenceRows gathers the rows of sentence i of b from packed values.
func sentenceRows(packed []float32, b *Batch, i, k int) [][]float32 {
	n := 0
	for n < len(b.batchSizes) && int(b.batchSizes[n]) > i {
		n++
	}
	rows := make([][]float32, n)
	for t := range n {
		p := b.pos(i, t)
		rows[t] = packed[p*k : (p+1)*k]
	}
	return rows
}

// argmax returns the index of the largest value.
func argmax(xs []float32) int {
	best, arg := float32(math.Inf(-1)), 0
	for i, x := range xs {
		if x > best {
			best, arg = x, i
		}
	}
	return arg
}
