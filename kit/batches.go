package kit

import (
	"math/rand/v2"
	"slices"
)

// LengthBatches cuts the indices 0..n-1 of the non-empty sentences (length
// gives each one's length) into batches of size. With rng, batches are of
// similar lengths yet random: the shuffled indices are cut into pools of
// 20 batches, each pool is sorted by length and cut, and the batches are
// shuffled, so that little work is wasted on short sentences waiting for
// long ones. With rng nil (prediction), the indices are sorted by length
// and cut in order.
func LengthBatches(n int, length func(i int) int, size int, rng *rand.Rand) [][]int {
	var ids []int
	for i := range n {
		if length(i) > 0 {
			ids = append(ids, i)
		}
	}
	byLength := func(a, b int) int { return length(a) - length(b) }
	if rng == nil {
		slices.SortStableFunc(ids, byLength)
		return slices.Collect(slices.Chunk(ids, size))
	}
	rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	var out [][]int
	for pool := range slices.Chunk(ids, 20*size) {
		slices.SortStableFunc(pool, byLength)
		for c := range slices.Chunk(pool, size) {
			out = append(out, c)
		}
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}
