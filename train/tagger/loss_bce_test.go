package tagger

import (
	"testing"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/kit"
)

// TestEntityLossIsBinaryCrossEntropy checks the entity-vs-O term of loss kl
// on hard pseudo-labels (self-training's): KL to a one-hot [p(O), p(entity)]
// through binaryLogits is binary cross entropy on the logit z, with
// gradient w (sigmoid(z) - y) / W. By hand, z = [0.5, -1, 2], y = [1, 0, 1],
// w = [1, 1, 0.5]: sigmoid(z) = [0.62245933, 0.26894142, 0.88079708],
// loss = (-log 0.62245933 - log 0.73105858 - 0.5 log 0.88079708) / 2.5.
func TestEntityLossIsBinaryCrossEntropy(t *testing.T) {
	lockThread(t)
	g := kit.NewGraph(gotch.CPU)
	defer g.Free()
	z := leaf(t, g, []float32{0.5, -1, 2}, 3, 1)
	soft := []float32{0, 1, 1, 0, 0, 1} // [p(O), p(entity)] per row
	loss := klDivergence(g, binaryLogits(g, z), soft, []float32{1, 1, 0.5})
	near(t, "binary cross entropy", kit.Item(loss), 0.34032107088792635, 1e-6)
	grad := gradOf(t, g, loss, z)
	for i, want := range []float64{-0.15101626751925817, 0.10757656854799805, -0.023840584404423538} {
		near(t, "gradient", float64(grad[i]), want, 1e-6)
	}
}
