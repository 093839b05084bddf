package tagger

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"testing"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/kit"
)

// lockThread pins the test's goroutine to its OS thread, as every goroutine
// that computes with libtorch must be.
func lockThread(t testing.TB) {
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
}

// leaf makes a float32 tensor that requires grad.
func leaf(t testing.TB, g *kit.Graph, data []float32, shape ...int64) *ts.Tensor {
	x := g.Floats(data, shape...)
	x, err := x.SetRequiresGrad(true, false)
	if err != nil {
		t.Fatal(err)
	}
	g.Keep(x)
	return x
}

// gradOf runs backward from loss and returns x's gradient.
func gradOf(t testing.TB, g *kit.Graph, loss, x *ts.Tensor) []float32 {
	if err := loss.Backward(); err != nil {
		t.Fatal(err)
	}
	return kit.Float32s(g.T(x.Grad(false)))
}

func near(t testing.TB, what string, got, want float64, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol || math.IsNaN(got) {
		t.Errorf("%s = %.8g, want %.8g (±%g)", what, got, want, tol)
	}
}

// The fixture of the loss tests: two rows of three logits, targets 1 and 2,
// weights 1 and 0.5. Softmax rows (by hand: exp, normalize):
//
//	p_0 = [0.23122390, 0.62853172, 0.14024438]
//	p_1 = [0.04661263, 0.01714783, 0.93623955]
var (
	lossLogits  = []float32{1, 2, 0.5, 0, -1, 3}
	lossTargets = []int64{1, 2}
	lossWeights = []float32{1, 0.5}
	lossProbs   = [][]float64{{0.23122389762214907, 0.6285317192117624, 0.14024438316608848}, {0.0466126225779739, 0.01714782554552039, 0.9362395518765058}}
)

// wantGrad is d loss / d z_ic = w_i c_i (p_ic - t_ic) / sum w, for a
// per-row scale c_i and target distribution t_i.
func wantGrad(scale func(i int) float64, target func(i, c int) float64) []float64 {
	var out []float64
	for i, row := range lossProbs {
		for c, p := range row {
			out = append(out, float64(lossWeights[i])*scale(i)*(p-target(i, c))/1.5)
		}
	}
	return out
}

func oneHot(i, c int) float64 {
	if int64(c) == lossTargets[i] {
		return 1
	}
	return 0
}

func checkGrad(t *testing.T, got []float32, want []float64) {
	t.Helper()
	for i := range want {
		near(t, "gradient", float64(got[i]), want[i], 1e-6)
	}
}

func TestCrossEntropy(t *testing.T) {
	lockThread(t)
	g := kit.NewGraph(gotch.CPU)
	defer g.Free()
	z := leaf(t, g, lossLogits, 2, 3)
	loss := crossEntropy(g, z, lossTargets, lossWeights)
	// (1·-log 0.62853172 + 0.5·-log 0.93623955) / 1.5
	near(t, "cross entropy", kit.Item(loss), 0.33154049065777297, 1e-6)
	checkGrad(t, gradOf(t, g, loss, z), wantGrad(func(int) float64 { return 1 }, oneHot))
}

// Through a noise channel the loss is -log sum_c p_ic c(obs_i | c), and its
// gradient p_i minus the posterior of the true class given the
// observation, p_ic c_ic / sum_c p_ic c_ic. Row 0 may be class 2 at a
// quarter of the odds of class 1, never 0; row 1 is class 2, or class 0 at
// odds 0.5.
func TestNoisyCrossEntropy(t *testing.T) {
	lockThread(t)
	g := kit.NewGraph(gotch.CPU)
	defer g.Free()
	z := leaf(t, g, lossLogits, 2, 3)
	ln := func(x float64) float32 { return float32(math.Log(x)) }
	ev := []float32{notAllowed, 0, ln(0.25), ln(0.5), notAllowed, 0}
	loss := noisyCrossEntropy(g, z, ev, lossWeights)
	// (1·-log(0.62853172 + 0.25·0.14024438) + 0.5·-log(0.5·0.04661263 + 0.93623955)) / 1.5
	near(t, "noisy cross entropy", kit.Item(loss), 0.2871560872336368, 1e-6)
	posterior := [][]float64{{0, 0.9471647447066638, 0.05283525529333614}, {0.02428889767926321, 0, 0.9757111023207368}}
	checkGrad(t, gradOf(t, g, loss, z), wantGrad(func(int) float64 { return 1 }, func(i, c int) float64 { return posterior[i][c] }))

	// One-hot evidence is cross entropy.
	g2 := kit.NewGraph(gotch.CPU)
	defer g2.Free()
	z2 := leaf(t, g2, lossLogits, 2, 3)
	sure := []float32{notAllowed, 0, notAllowed, notAllowed, notAllowed, 0}
	loss = noisyCrossEntropy(g2, z2, sure, lossWeights)
	near(t, "noisy cross entropy, one-hot", kit.Item(loss), 0.33154049065777297, 1e-6)
	checkGrad(t, gradOf(t, g2, loss, z2), wantGrad(func(int) float64 { return 1 }, oneHot))
}

func TestGeneralizedCrossEntropy(t *testing.T) {
	lockThread(t)
	g := kit.NewGraph(gotch.CPU)
	defer g.Free()
	z := leaf(t, g, lossLogits, 2, 3)
	const q = 0.7
	loss := generalizedCrossEntropy(g, z, lossTargets, lossWeights, q)
	// (1·(1 - 0.62853172^0.7)/0.7 + 0.5·(1 - 0.93623955^0.7)/0.7) / 1.5
	near(t, "gce", kit.Item(loss), 0.2857622591909681, 1e-6)
	// d/dz (1-p^q)/q = p^q (p - onehot): cross entropy's gradient scaled by p_y^q.
	scale := func(i int) float64 { return math.Pow(lossProbs[i][lossTargets[i]], q) }
	checkGrad(t, gradOf(t, g, loss, z), wantGrad(scale, oneHot))
}

func TestGCEApproachesCrossEntropy(t *testing.T) {
	lockThread(t)
	g := kit.NewGraph(gotch.CPU)
	defer g.Free()
	z := g.Floats(lossLogits, 2, 3)
	// (1 - p^q)/q = -log p - q (log p)²/2 + O(q²)
	near(t, "gce with q=1e-4", kit.Item(generalizedCrossEntropy(g, z, lossTargets, lossWeights, 1e-4)), 0.33154049065777297, 1e-4)
	// q = 1: mean absolute error (1 - p).
	near(t, "gce with q=1", kit.Item(generalizedCrossEntropy(g, z, lossTargets, lossWeights, 1)), (1*(1-0.6285317192117624)+0.5*(1-0.9362395518765058))/1.5, 1e-6)
}

func TestKLDivergence(t *testing.T) {
	lockThread(t)
	g := kit.NewGraph(gotch.CPU)
	defer g.Free()
	z := leaf(t, g, lossLogits, 2, 3)
	soft := []float32{0.2, 0.5, 0.3, 0, 0.25, 0.75}
	loss := klDivergence(g, z, soft, lossWeights)
	// sum_c s (log s - log p), 0·log 0 = 0, weighted as above.
	near(t, "kl", kit.Item(loss), 0.22432676640845448, 1e-6)
	checkGrad(t, gradOf(t, g, loss, z), wantGrad(func(int) float64 { return 1 }, func(i, c int) float64 { return float64(soft[i*3+c]) }))
}

func TestLossesWithoutWeightAreNil(t *testing.T) {
	lockThread(t)
	g := kit.NewGraph(gotch.CPU)
	defer g.Free()
	z := g.Floats(lossLogits, 2, 3)
	zero := []float32{0, 0}
	if crossEntropy(g, z, lossTargets, zero) != nil || generalizedCrossEntropy(g, z, lossTargets, zero, 0.7) != nil || klDivergence(g, z, make([]float32, 6), zero) != nil {
		t.Fatal("a loss with all weights 0 is not nil")
	}
}

func TestBinaryLogits(t *testing.T) {
	lockThread(t)
	g := kit.NewGraph(gotch.CPU)
	defer g.Free()
	z := g.Floats([]float32{0, 2, -1}, 3, 1)
	p := kit.Float32s(g.T(binaryLogits(g, z).Softmax(1, gotch.Float, false)))
	for i, x := range []float64{0, 2, -1} {
		sig := 1 / (1 + math.Exp(-x))
		near(t, "p(O)", float64(p[2*i]), 1-sig, 1e-6)
		near(t, "p(entity)", float64(p[2*i+1]), sig, 1e-6)
	}
}

func TestTorchErrorBecomesError(t *testing.T) {
	lockThread(t)
	g := kit.NewGraph(gotch.CPU)
	defer g.Free()
	err := kit.Guard(func() {
		a := g.Floats([]float32{1, 2, 3}, 3)
		b := g.Floats([]float32{1, 2}, 2)
		g.T(a.Add(b, false))
	})
	if err == nil {
		t.Fatal("adding tensors of shapes [3] and [2] did not fail")
	}
}

// TestKLDivergenceWhere: keeping every row is klDivergence (value and
// gradient); keeping row 1 alone is its own KL, l_1 = 0.2 (log 0.2 - log
// 0.231224) + 0.5 (log 0.5 - log 0.628532) + 0.3 (log 0.3 - log 0.140244)
// = 0.084716, with gradient on row 1 only; keeping none is 0.
func TestKLDivergenceWhere(t *testing.T) {
	lockThread(t)
	soft := []float32{0.2, 0.5, 0.3, 0, 0.25, 0.75}
	for _, tc := range []struct {
		keep []float32
		want float64
	}{{[]float32{1, 1}, 0.22432676640845448}, {[]float32{1, 0}, 0.08471577004337158}, {[]float32{0, 0}, 0}} {
		g := kit.NewGraph(gotch.CPU)
		z := leaf(t, g, lossLogits, 2, 3)
		loss := klDivergenceWhere(g, z, soft, lossWeights, g.Floats(tc.keep, 2))
		near(t, fmt.Sprint("kl keeping ", tc.keep), kit.Item(loss), tc.want, 1e-6)
		grad := gradOf(t, g, loss, z)
		if tc.keep[1] == 1 {
			checkGrad(t, grad, wantGrad(func(int) float64 { return 1 }, func(i, c int) float64 { return float64(soft[i*3+c]) }))
		} else {
			for i, x := range grad {
				want := 0.0
				if i < 3 && tc.keep[0] == 1 {
					want = lossProbs[0][i] - float64(soft[i]) // w_1 (p - s) / w_1
				}
				near(t, fmt.Sprint("gradient ", i, " keeping ", tc.keep), float64(x), want, 1e-6)
			}
		}
		g.Free()
	}
}

// TestSameArgmax: rows whose largest value is in the same column.
func TestSameArgmax(t *testing.T) {
	lockThread(t)
	g := kit.NewGraph(gotch.CPU)
	defer g.Free()
	a := g.Floats([]float32{1, 2, 0.5, 0, -1, 3, 5, 0, 1}, 3, 3)
	b := g.Floats([]float32{3, 0, 0, 0, 0, 1, 2, 1, 0}, 3, 3)
	if got := kit.Float32s(sameArgmax(g, a, b)); !slices.Equal(got, []float32{0, 1, 1}) {
		t.Errorf("same argmax %v, want [0 1 1]", got)
	}
}
