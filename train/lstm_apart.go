package train

import (
	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/ts"
)

// Prediction (and noisy-label removal's passes over the training set) runs
// a bidirectional LSTM layer's two directions at once, on two threads,
// instead of one after the other as libtorch's bidirectional op does. At this model's sizes (batches of a few hundred tokens, 200
// hidden units a direction) libtorch's intra-op threads barely speed a step
// up: PyTorch predicted 13% faster at 2 threads than at 1 on the same
// batches. Two directions side by side keep both cores busy with work of
// their own. Training keeps the fused op: its backward pass runs in
// libtorch's autograd engine on one thread anyway.
//
// The backward direction is libtorch's unidirectional LSTM over the packed
// batch with every sentence reversed (same lengths, so the same batch
// sizes): reversedOrder permutes the rows there and back. It runs on a
// helper thread that lives as long as the computing thread (lstmHelper),
// while the computing thread runs the forward direction; for the
// prediction the two split the computation's libtorch threads. Thread counts are set once
// per prediction, not per layer: setting one rebuilds libtorch's thread
// pools, and a first version that set them around every layer predicted at
// about 0.4x PyTorch (medians of 4 runs 0.36-0.43). One that ran both
// directions on helpers while the computing thread waited reached
// 0.84-0.95x: the computing thread's OpenMP team kept spinning on the cores
// the helpers needed.

// lstmApartMinThreads is the thread count from which prediction runs the
// directions apart.
const lstmApartMinThreads = 2

// lstmApartMinBatches is the number of batches from which a prediction
// runs the directions apart: setting up (thread counts, the helper) costs
// about as much as a batch, which a server's single requests and
// micro-batches would pay every time (the serving benchmark's direct calls
// fell from 7,700 to 1,123 tokens/s when they did).
const lstmApartMinBatches = 8

// lstmHelperFor prepares a prediction of batches batches on the calling
// thread: where it runs on one of onComputeThread's threads with 2 or more
// libtorch threads on the CPU, and the prediction is long enough, it gives
// the thread half of them, and returns the helper for the other half (nil
// otherwise) and the function that puts the count back.
func (m *Tagger) lstmHelperFor(batches int) (*lstmHelper, func()) {
	ct := currentComputeThread()
	threads := Threads()
	if m.device != gotch.CPU || ct == nil || threads < lstmApartMinThreads || batches < lstmApartMinBatches {
		return nil, func() {}
	}
	own := threads / 2
	if ct.lstmHelper == nil || ct.lstmHelper.threads != threads-own {
		if ct.lstmHelper != nil {
			ct.lstmHelper.stop()
		}
		ct.lstmHelper = startLSTMHelper(threads - own)
	}
	setThreads(own)
	return ct.lstmHelper, func() { setThreads(threads) }
}

// lstmDirectionsApart is one bidirectional layer of forward over x ([n,
// in], b's packed layout) for prediction: [n, 2*hidden], as the fused op
// computes it. It must run with gradients off.
func (m *Tagger) lstmDirectionsApart(g *graph, x, batchSizes *ts.Tensor, b *batch, ws []*ts.Tensor) *ts.Tensor {
	rev := g.ints(b.reversedOrder(), int64(b.n))
	xr := g.t(x.IndexSelect(0, rev, false))
	h0 := g.t(ts.Zeros([]int64{1, b.batchSizes[0], int64(m.Config.Hidden)}, gotch.Float, m.device))
	var backOut, backH, backC *ts.Tensor
	wait := g.lstmHelper.start(func() (err error) {
		backOut, backH, backC, err = ts.LstmData(xr, batchSizes, []*ts.Tensor{h0, h0}, ws[4:8], true, 1, 0, false, false)
		return err
	})
	fwd, fwdH, fwdC, fwdErr := ts.LstmData(x, batchSizes, []*ts.Tensor{h0, h0}, ws[0:4], true, 1, 0, false, false)
	backErr := wait() // before any panic: the helper reads tensors g frees
	for _, t := range []*ts.Tensor{fwd, fwdH, fwdC, backOut, backH, backC} {
		if t != nil {
			g.live = append(g.live, t)
		}
	}
	for _, err := range []error{fwdErr, backErr} {
		if err != nil {
			panic(torchError{err})
		}
	}
	back := g.t(backOut.IndexSelect(0, rev, false))
	return g.t(ts.Cat([]*ts.Tensor{fwd, back}, 1))
}

// reversedOrder maps each packed position of b to the position of the same
// sentence's token read from the end: token t of a sentence of length n
// goes to token n-1-t. The permutation is its own inverse.
func (b *batch) reversedOrder() []int64 {
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

// lstmHelper is a thread with threads libtorch threads and gradients off
// that runs one function at a time.
type lstmHelper struct {
	threads int
	jobs    chan func()
}

func startLSTMHelper(threads int) *lstmHelper {
	h := &lstmHelper{threads: threads, jobs: make(chan func())}
	goOnOwnThread(func() {
		setThreads(threads)
		setGradEnabled(false)
		for f := range h.jobs {
			f()
		}
	})
	return h
}

// start runs f on the helper; wait returns its error once it is done (a
// libtorch failure comes back as an error).
func (h *lstmHelper) start(f func() error) (wait func() error) {
	var err error
	done := make(chan struct{})
	h.jobs <- func() {
		defer close(done)
		err = run(func() {
			if e := f(); e != nil {
				panic(torchError{e})
			}
		})
	}
	return func() error {
		<-done
		return err
	}
}

// stop ends the helper's thread.
func (h *lstmHelper) stop() { close(h.jobs) }
