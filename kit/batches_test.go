package kit

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// Every non-empty sentence lands in exactly one batch of at most size;
// within a pool the batches are of similar lengths; without rng, the
// batches follow the lengths.
func TestLengthBatches(t *testing.T) {
	lengths := make([]int, 205)
	for i := range lengths {
		lengths[i] = (i * 37) % 50 // 0 for every 50th: left out
	}
	length := func(i int) int { return lengths[i] }
	for _, rng := range []*rand.Rand{rand.New(rand.NewPCG(1, 2)), nil} {
		bs := LengthBatches(len(lengths), length, 4, rng)
		var seen []int
		for _, b := range bs {
			if len(b) == 0 || len(b) > 4 {
				t.Fatalf("batch of %d", len(b))
			}
			for k := 1; k < len(b); k++ {
				if lengths[b[k]] < lengths[b[k-1]] {
					t.Errorf("batch %v not sorted by length", b)
				}
			}
			seen = append(seen, b...)
		}
		slices.Sort(seen)
		var want []int
		for i, l := range lengths {
			if l > 0 {
				want = append(want, i)
			}
		}
		if !slices.Equal(seen, want) {
			t.Fatalf("rng %v: batches hold %d indices, want the %d non-empty ones", rng != nil, len(seen), len(want))
		}
		if rng == nil {
			for k := 1; k < len(bs); k++ {
				if lengths[bs[k][0]] < lengths[bs[k-1][len(bs[k-1])-1]] {
					t.Fatalf("without rng, batch %d starts shorter than batch %d ends", k, k-1)
				}
			}
		}
	}
}
