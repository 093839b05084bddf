package tagger_test

import (
	"context"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/train/tagger"
)

// A loss written outside the package, as a new one would be: one type and
// one registration line. It is the token head's entity-vs-O and type
// losses with label smoothing (each target keeps 1-label_smoothing of its
// mass, the rest spread over the other classes), computed from what
// LossBatch exports alone, with a hyperparameter of its own.
const smoothLoss = "test-smoothed"

func init() { tagger.RegisterLoss(smoothLoss, smoothedCE{}) }

type smoothedCE struct{ smooth float64 }

// smoothingSeen is the label smoothing the plug-in last computed a loss
// with, for the test to see that its parameter reached it.
var smoothingSeen atomic.Value

func (smoothedCE) Doc() string  { return "label-smoothed cross entropy (a test's plug-in)" }
func (smoothedCE) Head() string { return tagger.TokenHead }
func (smoothedCE) Soft() bool   { return false }

func (smoothedCE) Params() []stages.Param {
	return []stages.Param{stages.FloatParam("label_smoothing", 0.1, "test-smoothed: the target mass spread over the other classes", stages.Range(0, 0.5))}
}

func (smoothedCE) Configure(p stages.Params) (tagger.Loss, error) {
	return smoothedCE{smooth: p.Float("label_smoothing")}, nil
}

func (l smoothedCE) Compute(lb *tagger.LossBatch) *ts.Tensor {
	smoothingSeen.Store(l.smooth)
	typ, entity := lb.TokenOutputs()
	n, types := lb.Batch.Tokens(), lb.K-1
	entityT := make([]float32, 2*n)
	typT := make([]float32, types*n)
	var entities, tokens float64
	for p, y := range lb.Targets() {
		switch {
		case y == tagger.Ignored:
			continue
		case y == 0:
			copy(entityT[2*p:], []float32{float32(1 - l.smooth), float32(l.smooth)})
		default:
			copy(entityT[2*p:], []float32{float32(l.smooth), float32(1 - l.smooth)})
			if y != tagger.AnyEntity {
				for c := range types {
					typT[types*p+c] = float32(l.smooth / float64(types-1))
				}
				typT[types*p+int(y)-1] = float32(1 - l.smooth)
				entities++
			}
		}
		tokens++
	}
	if tokens == 0 {
		return nil
	}
	g := lb.G
	term := func(logits *ts.Tensor, targets []float32, cols int, count float64) *ts.Tensor {
		logp := g.T(logits.LogSoftmax(1, gotch.Float, false))
		s := g.T(g.T(logp.Mul(g.Floats(targets, int64(n), int64(cols)), false)).Sum(gotch.Float, false))
		return g.T(s.MulScalar(g.Scalar(-1/count), false))
	}
	loss := term(entity, entityT, 2, tokens)
	if entities > 0 {
		loss = g.T(loss.Add(term(typ, typT, types, entities), false))
	}
	return loss
}

// The plug-in trains a tagger through the package's own Fit with its own
// parameter: the value given reaches the loss, the loss falls, and the
// tagger learns the fixture's entities (scored on the training sentences
// themselves). A value out of the declared range is refused.
func TestLossFromOutsideThePackage(t *testing.T) {
	if !slices.Contains(tagger.LossNames(), smoothLoss) {
		t.Fatalf("losses %v lack %s", tagger.LossNames(), smoothLoss)
	}
	if p := tagger.Param("label_smoothing"); p.Default != 0.1 {
		t.Errorf("the tagger declares label_smoothing as %+v", p)
	}
	c := fixtureCorpus(fixture)
	run := tagger.DefaultTrainConfig()
	run.Loss, run.Epochs, run.BatchSize, run.LearningRate, run.Seed = smoothLoss, 12, 4, 0.02, 7
	run.SetLossParam("label_smoothing", 0.05)
	cfg := tagger.Config{Scheme: "io", Head: tagger.TokenHead, WordDim: 12, CharDim: 6, CharFilters: 8, CharKernel: 3,
		MaxWordLen: 12, CasingDim: 4, Hidden: 10, Layers: 1, Dropout: 0.1}
	m, res, err := tagger.Fit(context.Background(), tagger.Job{Train: c, Dev: c, Model: cfg, Run: run, Device: gotch.CPU})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if got := smoothingSeen.Load(); got != 0.05 {
		t.Errorf("the loss computed with label smoothing %v, want the 0.05 given", got)
	}
	first, last := res.Epochs[0].TrainLoss, res.Epochs[len(res.Epochs)-1].TrainLoss
	if math.IsNaN(first) || !(last < first*0.7) {
		t.Errorf("loss %v after the first epoch, %v after the last", first, last)
	}
	if res.BestDevF1 < 0.5 {
		t.Errorf("best F1 on the training sentences %v, want at least 0.5", res.BestDevF1)
	}

	run.SetLossParam("label_smoothing", 0.9)
	if _, _, err := tagger.Fit(context.Background(), tagger.Job{Train: c, Model: cfg, Run: run, Device: gotch.CPU}); err == nil || !strings.Contains(err.Error(), "label_smoothing") {
		t.Errorf("label_smoothing 0.9: %v", err)
	}
}
