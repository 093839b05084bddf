package selftrain

import (
	"math"
	"strings"
	"testing"
)

// TestSoftLabelsHandComputed checks eq. 8 on tags [O, I-LOC, I-PER].
//
//	token a [0.1, 0.72, 0.18]:      p(entity) 0.9, f = [0.8, 0.2]
//	token b [0.15, 0.2125, 0.6375]: p(entity) 0.85, f = [0.25, 0.75]
//	token c [0.3, 0.35, 0.35]:      p(entity) 0.7 < 0.8: no type target, still an entity (>= 0.5)
//	token d [0.9, 0.05, 0.05]:      O
//
// g = [0.8 + 0.25, 0.2 + 0.75] = [1.05, 0.95]; a: [0.64/1.05, 0.04/0.95] =
// [0.609524, 0.042105] / 0.651629 = [0.935385, 0.064615]; b: [0.0625/1.05,
// 0.5625/0.95] = [0.059524, 0.592105] / 0.651629 = [0.091346, 0.908654].
// Without the division by g, a would be [0.941176, 0.058824]: the
// frequency of LOC lowers it.
func TestSoftLabelsHandComputed(t *testing.T) {
	probs := [][][]float32{
		{{0.1, 0.72, 0.18}, {0.15, 0.2125, 0.6375}},
		{},
		{{0.3, 0.35, 0.35}, {0.9, 0.05, 0.05}},
	}
	got, err := SoftLabels(probs, Targets{Threshold: 0.8, Entity: EntityHard})
	if err != nil {
		t.Fatal(err)
	}
	want := [][][]float64{
		{{0, 0.9353846153846154, 0.0646153846153846}, {0, 0.09134615384615387, 0.9086538461538461}},
		{},
		{{0, 0, 0}, {1, 0, 0}},
	}
	for i := range want {
		if len(got[i]) != len(want[i]) {
			t.Fatalf("sentence %d: %d tokens, want %d", i+1, len(got[i]), len(want[i]))
		}
		for tok, row := range want[i] {
			for c, x := range row {
				if d := math.Abs(float64(got[i][tok][c]) - x); d > 1e-5 {
					t.Errorf("sentence %d token %d value %d: %v, want %v", i+1, tok+1, c, got[i][tok][c], x)
				}
			}
		}
	}
}

// TestSoftLabelsThreshold: a threshold of 0.95 leaves token b of the case
// above out, and token a alone then makes the frequencies, g = [0.8, 0.2]:
// [0.64/0.8, 0.04/0.2] = [0.8, 0.2].
func TestSoftLabelsThreshold(t *testing.T) {
	got, err := SoftLabels([][][]float32{{{0.04, 0.768, 0.192}, {0.15, 0.2125, 0.6375}}}, Targets{Threshold: 0.95, Entity: EntityHard})
	if err != nil {
		t.Fatal(err)
	}
	for c, x := range []float64{0, 0.8, 0.2, 0, 0, 0} {
		if d := math.Abs(float64(got[0][c/3][c%3]) - x); d > 1e-5 {
			t.Errorf("token %d value %d: %v, want %v", c/3+1, c%3, got[0][c/3][c%3], x)
		}
	}
}

func TestSoftLabelsErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		probs     [][][]float32
		threshold float64
		want      string
	}{
		"ragged":    {[][][]float32{{{0.5, 0.5}}, {{0.2, 0.3, 0.5}}}, 0.8, "sentence 2, token 1: 3 probabilities, want 2"},
		"threshold": {nil, 1.5, "entity threshold 1.5"},
		"O alone":   {[][][]float32{{{1}}}, 0.8, "no types"},
	} {
		_, err := SoftLabels(tc.probs, Targets{Threshold: tc.threshold, Entity: EntityHard})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", name, err, tc.want)
		}
	}
}

// TestSoftLabelsModelEntityTarget: with EntityModel the entity-vs-O target
// is the model's own p(O), also where the types are left out; the types
// are those of eq. 8 as with hard targets.
func TestSoftLabelsModelEntityTarget(t *testing.T) {
	got, err := SoftLabels([][][]float32{{{0.1, 0.72, 0.18}, {0.3, 0.35, 0.35}, {0.9, 0.05, 0.05}}}, Targets{Threshold: 0.8, Entity: EntityModel})
	if err != nil {
		t.Fatal(err)
	}
	// Token 1 alone is confident: g = f_1 = [0.8, 0.2], y = [0.64/0.8, 0.04/0.2] = [0.8, 0.2].
	checkTargets(t, got, [][][]float64{{{0.1, 0.8, 0.2}, {0.3, 0, 0}, {0.9, 0, 0}}})
	if _, err := SoftLabels(nil, Targets{Threshold: 0.8, Entity: "soft"}); err == nil || !strings.Contains(err.Error(), `entity target "soft"`) {
		t.Errorf("unknown entity target: %v", err)
	}
}

// TestSoftLabelsEnsembleEntityTarget: with EntityEnsemble the entity-vs-O
// target is the averaged predictions' p(O), whatever the model says (token
// 2: the model's p(O) 0.3, the ensemble's 0.6; token 3: 0.9 against 0.2);
// the types are still the model's, by eq. 8.
func TestSoftLabelsEnsembleEntityTarget(t *testing.T) {
	probs := [][][]float32{{{0.1, 0.72, 0.18}, {0.3, 0.35, 0.35}, {0.9, 0.05, 0.05}}}
	avg := [][][]float32{{{0.25, 0.5, 0.25}, {0.6, 0.2, 0.2}, {0.2, 0.1, 0.7}}}
	got, err := SoftLabels(probs, Targets{Threshold: 0.8, Entity: EntityEnsemble, Ensemble: avg})
	if err != nil {
		t.Fatal(err)
	}
	checkTargets(t, got, [][][]float64{{{0.25, 0.8, 0.2}, {0.6, 0, 0}, {0.2, 0, 0}}})
	for name, tc := range map[string]struct {
		avg  [][][]float32
		want string
	}{
		"missing":   {nil, "the averaged predictions have 0 sentences, the corpus 1"},
		"tokens":    {[][][]float32{{{1, 0, 0}}}, "sentence 1: the averaged predictions have 1 tokens, the corpus 3"},
		"tag count": {[][][]float32{{{1, 0, 0}, {1, 0}, {1, 0, 0}}}, "sentence 1, token 2: the averaged predictions have 2 tags, the model 3"},
	} {
		_, err := SoftLabels(probs, Targets{Threshold: 0.8, Entity: EntityEnsemble, Ensemble: tc.avg})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", name, err, tc.want)
		}
	}
}

// TestSoftLabelsSharpenEntityTarget: with EntitySharpen the entity-vs-O
// target is [p(O), p(entity)] squared, divided by their sums over every
// token (G = [0.1 + 0.3 + 0.9, 0.9 + 0.7 + 0.1] = [1.3, 1.7]) and
// renormalized: token 1 p(O) = (0.01/1.3) / (0.01/1.3 + 0.81/1.7) =
// 0.015888, token 2 (0.09/1.3) / (0.09/1.3 + 0.49/1.7) = 0.193671, token 3
// (0.81/1.3) / (0.81/1.3 + 0.01/1.7) = 0.990648. The types are eq. 8's.
func TestSoftLabelsSharpenEntityTarget(t *testing.T) {
	got, err := SoftLabels([][][]float32{{{0.1, 0.72, 0.18}, {0.3, 0.35, 0.35}, {0.9, 0.05, 0.05}}}, Targets{Threshold: 0.8, Entity: EntitySharpen})
	if err != nil {
		t.Fatal(err)
	}
	checkTargets(t, got, [][][]float64{{{0.015887850467289724, 0.8, 0.2}, {0.19367088607594937, 0, 0}, {0.9906474820143885, 0, 0}}})
}
