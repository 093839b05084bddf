package kit

import (
	"github.com/sugarme/gotch"
	lib "github.com/sugarme/gotch/libtch"
	"github.com/sugarme/gotch/ts"
)

// cudnnLSTM is cuDNN's mode number for an LSTM (cudnnRNNMode_t), which
// libtorch's _cudnn_rnn_flatten_weight takes as is.
const cudnnLSTM = 2

// FlattenLSTM lays each bidirectional LSTM layer's eight weights (w_ih,
// w_hh, b_ih, b_hh forward, then backward) out in one contiguous buffer,
// in cuDNN's order, as PyTorch's LSTM.flatten_parameters does: libtorch
// points the parameters at views of the buffer in place, so the
// optimizer, checkpoints and loading (which copies into the parameters)
// keep working on them. Without it cuDNN copies every weight into a
// scratch buffer on every call ("RNN module weights are not part of single
// contiguous chunk of memory"). inputs are the layers' input sizes. A
// no-op but on a CUDA device with cuDNN.
func FlattenLSTM(device gotch.Device, layers [][]*ts.Tensor, inputs []int, hidden int) error {
	if !device.IsCuda() || !gotch.CUDA.CudnnIsAvailable() {
		return nil
	}
	return Guard(func() {
		NoGrad(func() {
			for l, ws := range layers {
				cws := make([]lib.Ctensor, len(ws))
				for i, w := range ws {
					cws[i] = lib.Ctensor(w.Ctensor())
				}
				out := new(lib.Ctensor)
				// 4 weights per direction; no projection; one layer, time-major, both directions.
				lib.Atg_CudnnRnnFlattenWeight(out, cws, len(cws), 4, int64(inputs[l]), cudnnLSTM, int64(hidden), 0, 1, 0, 1)
				if err := ts.TorchErr(); err != nil {
					Abort(err)
				}
				// The parameters now hold the buffer's storage; its own handle can go.
				_ = ts.New(*out).Drop()
			}
		})
	})
}
