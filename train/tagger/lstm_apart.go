package tagger

import (
	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/ts"

	"github.com/nerflow/nerflow/kit"
)

// Prediction runs each BiLSTM layer's directions apart, on two threads,
// where kit.LSTMHelperFor gives it a helper (see package kit): the
// backward direction is libtorch's unidirectional LSTM over the packed
// batch with every sentence reversed (same lengths, so the same batch
// sizes), reversedOrder permuting the rows there and back.

// lstmDirectionsApart is one bidirectional layer of forward over x ([n,
// in], b's packed layout) for prediction: [n, 2*hidden], as the fused op
// computes it. It must run with gradients off.
func (m *Tagger) lstmDirectionsApart(g *kit.Graph, x, batchSizes *ts.Tensor, b *Batch, ws []*ts.Tensor) *ts.Tensor {
	rev := g.Ints(b.reversedOrder(), int64(b.n))
	xr := g.T(x.IndexSelect(0, rev, false))
	h0 := g.T(ts.Zeros([]int64{1, b.batchSizes[0], int64(m.Config.Hidden)}, gotch.Float, m.device))
	var backOut, backH, backC *ts.Tensor
	wait := g.LSTMHelper.Start(func() (err error) {
		backOut, backH, backC, err = ts.LstmData(xr, batchSizes, []*ts.Tensor{h0, h0}, ws[4:8], true, 1, 0, false, false)
		return err
	})
	fwd, fwdH, fwdC, fwdErr := ts.LstmData(x, batchSizes, []*ts.Tensor{h0, h0}, ws[0:4], true, 1, 0, false, false)
	backErr := wait() // before any panic: the helper reads tensors g frees
	g.Keep(fwd, fwdH, fwdC, backOut, backH, backC)
	for _, err := range []error{fwdErr, backErr} {
		if err != nil {
			kit.Abort(err)
		}
	}
	back := g.T(backOut.IndexSelect(0, rev, false))
	return g.T(ts.Cat([]*ts.Tensor{fwd, back}, 1))
}

// reversedOrder maps each packed position of b to the position of the same
// sentence's token read from the end: token t of a sentence of length n
// goes to token n-1-t. The permutation is its own inverse.
func (b *Batch) reversedOrder() []int64 {
	order := make([]int64, b.n)
	for i := range b.ids {
		n := 0
		for n < len(b.batchSizes) && int(b.batchSizes[n]) > i {
			n++
		}
		for t := range n {
			order[b.pos(i, t)] = int64(b.pos(i, n-1-t))
		}
	}
	return order
}
