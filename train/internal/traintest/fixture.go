// Package traintest holds the tiny corpus that the tests of the models
// under train/ train on.
package traintest

import (
	"math"
	"testing"

	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/corpus/corpustest"
	"github.com/nerflow/nerflow/kit"
)

// Fixture is a tiny corpus, token/TAG (O when untagged), one sentence a
// line.
var Fixture = []string{
	"John/B-PER Smith/I-PER lives in Paris/B-LOC .",
	"Mary/B-PER visited Berlin/B-LOC yesterday .",
	"The mayor of Rome/B-LOC met Anna/B-PER Weber/I-PER .",
	"Peter/B-PER flew to London/B-LOC on Monday .",
	"In Madrid/B-LOC , Carlos/B-PER Ruiz/I-PER won .",
	"Berlin/B-LOC and Paris/B-LOC are cities .",
	"Anna/B-PER likes Rome/B-LOC .",
	"Smith/B-PER said nothing .",
	"It rained in London/B-LOC .",
	"Carlos/B-PER met John/B-PER in Madrid/B-LOC .",
}

// Corpus parses lines of the fixture's notation (corpustest.Inline's).
func Corpus(lines []string) *corpus.Corpus { return corpustest.Inline(lines...) }

// HostWeights copies weights to the host, keyed by name, to compare them
// before and after training.
func HostWeights(t testing.TB, w []ts.NamedTensor) map[string][]float32 {
	t.Helper()
	out, err := kit.HostCopies(w)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// LargestMove is the largest change of any weight between two copies of
// HostWeights: 0 for weights that did not learn.
func LargestMove(before, after map[string][]float32) float64 {
	var most float64
	for name, b := range before {
		for i, x := range b {
			most = max(most, math.Abs(float64(after[name][i]-x)))
		}
	}
	return most
}

// Paths enumerates every tag path of length n over k tags, for checking a
// CRF's dynamic programs against brute force.
func Paths(n, k int) [][]int {
	if n == 0 {
		return [][]int{nil}
	}
	var out [][]int
	for _, p := range Paths(n-1, k) {
		for j := range k {
			out = append(out, append(append([]int(nil), p...), j))
		}
	}
	return out
}
