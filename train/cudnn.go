package train

import (
	"github.com/sugarme/gotch"
	lib "github.com/sugarme/gotch/libtch"
	"github.com/sugarme/gotch/ts"
)

// cudnnLSTM is cuDNN's mode number for an LSTM (cudnnRNNMode_t), which
// libtorch's _cudnn_rnn_flatten_weight takes as is.
const cudnnLSTM = 2

// flattenLSTM lays each BiLSTM layer's eight weights out in one contiguous
// buffer, in cuDNN's order, as PyTorch's LSTM.flatten_parameters does:
// libtorch points the parameters at views of the buffer in place, so the
// optimizer, checkpoints and loading (which copies into the parameters)
// keep working on them. Without it cuDNN copies every weight into a
// scratch buffer on every call ("RNN module weights are not part of single
// contiguous chunk of memory"). Only on a CUDA device with cuDNN.
func (m *Tagger) flattenLSTM() error {
	if !m.device.IsCuda() || !gotch.CUDA.CudnnIsAvailable() {
		return nil
	}
	return run(func() {
		noGrad(func() {
			ins := m.Config.layerInputs()
			hidden := int64(m.Config.Hidden)
			for l, ws := range m.lstm {
				cws := make([]lib.Ctensor, len(ws))
				for i, w := range ws {
					cws[i] = lib.Ctensor(w.Ctensor())
				}
				out := new(lib.Ctensor)
				// 4 weights per direction; no projection; one layer, time-major, both directions.
				lib.Atg_CudnnRnnFlattenWeight(out, cws, len(cws), 4, int64(ins[l]), cudnnLSTM, hidden, 0, 1, 0, 1)
				if err := ts.TorchErr(); err != nil {
					panic(torchError{err})
				}
				// The parameters now hold the buffer's storage; its own handle can go.
				_ = ts.New(*out).Drop()
			}
		})
	})
}
