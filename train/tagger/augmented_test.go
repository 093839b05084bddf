package tagger

import (
	"slices"
	"testing"
)

// TestAugmentedTargetsAreTheOriginals: the augmented copy of a batch (other
// words, same lengths) gets the type targets of its originals, by hand:
// tags O, PER, LOC; a token with p(O) 0.2 and PER, LOC weights 0.6, 0.2 has
// the type target [0.75, 0.25]; one with no type weight is left out.
func TestAugmentedTargetsAreTheOriginals(t *testing.T) {
	ex := func(words ...int64) example {
		e := example{words: words, casing: make([]int64, len(words))}
		for range words {
			e.chars = append(e.chars, []int64{1})
		}
		return e
	}
	exs := []example{ex(2, 3), ex(4, 5, 6), ex(7)}
	exs[0].soft = [][]float32{{0.2, 0.6, 0.2}, {1, 0, 0}}
	exs[1].soft = [][]float32{{0.1, 0, 0.9}, {0.5, 0.5, 0}, {1, 0, 0}}
	exs[2].soft = [][]float32{{0, 1, 0}}
	aug := []example{ex(8, 3), ex(4, 9, 6), ex(10)}
	ids := []int{1, 0}
	withTargetsOf(aug, exs, ids)
	_, _, types, typeW := klTargets(&LossBatch{Batch: newBatch(aug, ids), exs: aug, K: 3})
	_, _, origTypes, origW := klTargets(&LossBatch{Batch: newBatch(exs, ids), exs: exs, K: 3})
	if !slices.Equal(types, origTypes) || !slices.Equal(typeW, origW) {
		t.Errorf("augmented type targets %v (weights %v), the originals' %v (%v)", types, typeW, origTypes, origW)
	}
	// Packed by time step, longest sentence first: sentence 1's tokens 1,
	// 2, 3 at 0, 2, 4; sentence 0's tokens 1, 2 at 1, 3.
	want := []float32{0, 1, 0.75, 0.25, 1, 0, 0, 0, 0, 0}
	wantW := []float32{1, 1, 1, 0, 0}
	if !slices.Equal(types, want) || !slices.Equal(typeW, wantW) {
		t.Errorf("type targets %v weights %v, want %v and %v", types, typeW, want, wantW)
	}
	if aug[2].soft != nil {
		t.Error("a sentence outside the batch got targets")
	}
}

// A nil row of soft targets leaves its token out of both terms of loss kl:
// weight 0 for entity vs O and for the types, the other tokens unchanged.
func TestNilSoftRowIsLeftOut(t *testing.T) {
	e := example{words: []int64{2, 3, 4}, casing: make([]int64, 3), chars: [][]int64{{1}, {1}, {1}}}
	e.soft = [][]float32{{0.2, 0.6, 0.2}, nil, {1, 0, 0}}
	exs := []example{e}
	entity, entityW, types, typeW := klTargets(&LossBatch{Batch: newBatch(exs, []int{0}), exs: exs, K: 3})
	if want := []float32{0.2, 0.8, 0, 0, 1, 0}; !slices.Equal(entity, want) {
		t.Errorf("entity targets %v, want %v", entity, want)
	}
	if want := []float32{1, 0, 1}; !slices.Equal(entityW, want) {
		t.Errorf("entity weights %v, want %v", entityW, want)
	}
	if want := []float32{0.75, 0.25, 0, 0, 0, 0}; !slices.Equal(types, want) {
		t.Errorf("type targets %v, want %v", types, want)
	}
	if want := []float32{1, 0, 0}; !slices.Equal(typeW, want) {
		t.Errorf("type weights %v, want %v", typeW, want)
	}
	if err := attachSoft(exs, [][][]float32{{{1, 0, 0}, nil, {0, 0.5, 0.5}}}, 3); err != nil {
		t.Errorf("nil row refused: %v", err)
	}
}
