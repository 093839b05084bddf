package kit

import "github.com/sugarme/gotch"

// Prediction (and noisy-label removal's passes over the training set) runs
// a bidirectional LSTM layer's two directions at once, on two threads,
// instead of one after the other as libtorch's bidirectional op does. At
// the tagger's sizes (batches of a few hundred tokens, 200 hidden units a
// direction) libtorch's intra-op threads barely speed a step up; two
// directions side by side keep both cores busy with work of their own.
// Training keeps the fused op: its backward pass runs in libtorch's
// autograd engine on one thread anyway.
//
// The helper thread (LSTMHelper) lives as long as the computing thread and
// runs one direction while the computing thread runs the other; the two
// split the computation's libtorch threads. Thread counts are set once per
// prediction, not per layer, because setting one rebuilds libtorch's
// thread pools; and the computing thread runs a direction itself rather
// than waiting on two helpers, because its OpenMP team would keep spinning
// on the cores they need. docs/tagger.md (Threads) has the measurements.

// LSTMApartMinThreads is the thread count from which prediction runs the
// directions apart.
const LSTMApartMinThreads = 2

// LSTMApartMinBatches is the number of batches from which a prediction
// runs the directions apart: setting up (thread counts, the helper) costs
// about as much as a batch, which a server's single requests and
// micro-batches would pay every time.
const LSTMApartMinBatches = 8

// LSTMHelperFor prepares a prediction of batches batches on device on the
// calling thread: where it runs on one of OnComputeThread's threads with 2
// or more libtorch threads on the CPU, and the prediction is long enough,
// it gives the thread half of them, and returns the helper for the other
// half (nil otherwise) and the function that puts the count back. Set it
// as the prediction's Graph.LSTMHelper.
func LSTMHelperFor(device gotch.Device, batches int) (*LSTMHelper, func()) {
	ct := currentComputeThread()
	threads := Threads()
	if device != gotch.CPU || ct == nil || threads < LSTMApartMinThreads || batches < LSTMApartMinBatches {
		return nil, func() {}
	}
	own := threads / 2
	if ct.LSTMHelper == nil || ct.LSTMHelper.threads != threads-own {
		if ct.LSTMHelper != nil {
			ct.LSTMHelper.stop()
		}
		ct.LSTMHelper = startLSTMHelper(threads - own)
	}
	setThreads(own)
	return ct.LSTMHelper, func() { setThreads(threads) }
}

// LSTMHelper is a thread with threads libtorch threads and gradients off
// that runs one function at a time: one direction of a bidirectional LSTM
// layer while the computing thread runs the other.
type LSTMHelper struct {
	threads int
	jobs    chan func()
}

func startLSTMHelper(threads int) *LSTMHelper {
	h := &LSTMHelper{threads: threads, jobs: make(chan func())}
	goOnOwnThread(func() {
		setThreads(threads)
		setGradEnabled(false)
		for f := range h.jobs {
			f()
		}
	})
	return h
}

// Start runs f on the helper; wait returns its error once it is done (a
// libtorch failure comes back as an error).
func (h *LSTMHelper) Start(f func() error) (wait func() error) {
	var err error
	done := make(chan struct{})
	h.jobs <- func() {
		defer close(done)
		err = Guard(func() {
			if e := f(); e != nil {
				Abort(e)
			}
		})
	}
	return func() error {
		<-done
		return err
	}
}

// stop ends the helper's thread.
func (h *LSTMHelper) stop() { close(h.jobs) }
