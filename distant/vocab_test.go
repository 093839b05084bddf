package distant

import (
	"math/rand/v2"
	"testing"
)

func TestVocabTable(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	// Tokens of every length up to 20 that share their first 8 bytes, so
	// that long ones must be told apart by their text.
	word := func() string {
		b := []byte("prefix12")[:r.IntN(9)]
		for n := r.IntN(13); n > 0; n-- {
			b = append(b, byte('a'+r.IntN(3)))
		}
		return string(b)
	}
	for _, size := range []int{0, 1, 5, 1000} {
		want := map[string]int32{}
		var texts []string
		for len(texts) < size {
			w := word()
			if _, ok := want[w]; !ok {
				want[w] = int32(len(texts))
				texts = append(texts, w)
			}
		}
		roots := make([]int32, len(texts))
		for i := range roots {
			roots[i] = int32(1000 + i)
		}
		v := newVocabTable(texts, roots)
		for range 5000 {
			w := word()
			got := v.lookup(w)
			id, ok := want[w]
			if !ok {
				id = -1
			}
			if got.id != id || (ok && got.root != 1000+id) {
				t.Fatalf("size %d: lookup(%q) = %+v, want id %d", size, w, got, id)
			}
		}
		for i, w := range texts {
			if got := v.lookup(w); got.id != int32(i) {
				t.Fatalf("size %d: lookup(%q) = %+v, want %d", size, w, got, i)
			}
		}
		if load := float64(len(texts)) / float64(len(v.slots)); load > 0.75 {
			t.Errorf("size %d: load %.2f", size, load)
		}
	}
}

func TestVocabTableHead(t *testing.T) {
	for s, want := range map[string]uint64{"": 0, "a": 0x61, "ab": 0x6261, "abcdefghij": 0x6867666564636261} {
		if got := head(s); got != want {
			t.Errorf("head(%q) = %#x, want %#x", s, got, want)
		}
	}
}
