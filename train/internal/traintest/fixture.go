// Package traintest holds the tiny corpus that the tests of the models
// under train/ train on.
package traintest

import (
	"math"
	"sort"
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

// CheckTopK checks a masked LM's ranking of one position against its
// whole distribution logp (log-probabilities, -Inf for words never drawn):
// ids are the k most likely words, best first, and scores are their
// log-probabilities up to one constant.
func CheckTopK(t testing.TB, logp []float64, ids []int, scores []float64, k int) {
	t.Helper()
	order := make([]int, 0, len(logp))
	for id, x := range logp {
		if !math.IsInf(x, -1) {
			order = append(order, id)
		}
	}
	sort.SliceStable(order, func(a, b int) bool { return logp[order[a]] > logp[order[b]] })
	if len(ids) != k || len(scores) != k {
		t.Fatalf("%d ids and %d scores, want the top %d", len(ids), len(scores), k)
	}
	for i, id := range ids {
		if math.Abs(logp[id]-logp[order[i]]) > 1e-5 { // float32 ranking on the device
			t.Fatalf("rank %d: word %d (log-probability %v), the distribution's is %d (%v)", i, id, logp[id], order[i], logp[order[i]])
		}
		if d := (scores[i] - scores[0]) - (logp[id] - logp[ids[0]]); math.Abs(d) > 1e-4 {
			t.Fatalf("rank %d: score %v, %v below the best's, the distribution's gap is %v", i, scores[i], scores[0]-scores[i], logp[ids[0]]-logp[id])
		}
	}
}
