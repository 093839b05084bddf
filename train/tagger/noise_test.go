package tagger

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// Noisy-label removal on hand-made probabilities, tau = 0.7, tags O=0,
// I-PER=1, I-LOC=2.
func TestNoisyLabelRemoval(t *testing.T) {
	exs := []example{
		// O, PER, LOC, ignored, entity of unknown type
		{words: make([]int64, 5), targets: []int32{0, 1, 2, ignored, anyEntity}},
		// LOC, LOC, O
		{words: make([]int64, 3), targets: []int32{2, 2, 0}},
	}
	pEntity := [][]float32{{0.2, 0.9, 0.9, 0.9, 0.1}, {0.95, 0.95, 0.35}}
	// Probability of each token's own distant type among the types.
	pOwnType := [][]float32{{0, 0.8, 0.6, 0, 0}, {0.5, 0.7, 0}}
	weights := newNoiseWeights(exs, true)
	r := newRemoval(0.7, 2)
	for i := range exs {
		r.judge(weights.w[i], exs[i].targets,
			func(tok, class int) float32 {
				if int(exs[i].targets[tok]) != class+1 {
					t.Fatalf("asked for class %d of token %d labeled %d", class, tok, exs[i].targets[tok])
				}
				return pOwnType[i][tok]
			},
			func(tok int) float32 { return pEntity[i][tok] })
	}
	// Entity loss: only O tokens whose p(O) <= tau go: token 0 of example 0
	// has p(O) = 0.8 and stays, token 2 of example 1 has p(O) = 0.65 and goes.
	// Entity tokens, ignored ones and unknown types always keep it.
	// Type loss: PER at 0.8 stays; LOC at 0.6, 0.5 and 0.7 (not above tau)
	// go: 3 of 3 LOC tokens.
	want := []tokenWeights{
		{entity: []float32{1, 1, 1, 1, 1}, typ: []float32{1, 1, 0, 1, 1}},
		{entity: []float32{1, 1, 0}, typ: []float32{0, 0, 1}},
	}
	for i := range want {
		if !slices.Equal(weights.w[i].entity, want[i].entity) || !slices.Equal(weights.w[i].typ, want[i].typ) {
			t.Fatalf("example %d: weights %+v, want %+v", i, weights.w[i], want[i])
		}
	}
	if !slices.Equal(r.tokens, []int{1, 3}) || !slices.Equal(r.removed, []int{0, 3}) {
		t.Fatalf("counts %v removed %v", r.tokens, r.removed)
	}
	// LOC lost 3 of 3 (> 90%): it is spared, every LOC token counts again.
	if spared := r.spare(exs, weights); !slices.Equal(spared, []int{1}) {
		t.Fatalf("spared %v, want [1] (LOC)", spared)
	}
	if !slices.Equal(weights.w[0].typ, []float32{1, 1, 1, 1, 1}) || !slices.Equal(weights.w[1].typ, []float32{1, 1, 1}) {
		t.Fatalf("after sparing: %v %v", weights.w[0].typ, weights.w[1].typ)
	}
	if e, ty := weights.removed(); e != 1 || ty != 0 {
		t.Fatalf("removed %d entity, %d type weights; want 1, 0", e, ty)
	}
	// A checkpoint round trip keeps them.
	ent, typ := weights.pack()
	again := newNoiseWeights(exs, true)
	if err := again.unpack(ent, typ); err != nil || !slices.Equal(again.w[1].entity, weights.w[1].entity) {
		t.Fatalf("unpack: %v %v", err, again.w[1])
	}
	if err := again.unpack(ent[:3], typ); err == nil {
		t.Fatal("unpacking weights of the wrong length succeeded")
	}
}

func TestDropOutside(t *testing.T) {
	exs := []example{{targets: make([]int32, 2000)}}
	exs[0].targets[0] = 1
	dropOutside(exs, 0.5, newTestRand(9))
	dropped := 0
	for _, y := range exs[0].targets {
		if y == ignored {
			dropped++
		}
	}
	if exs[0].targets[0] != 1 || dropped < 900 || dropped > 1100 {
		t.Fatalf("dropped %d of 1999 O tokens (want about half), entity token now %d", dropped, exs[0].targets[0])
	}
}

func newTestRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed)) }
