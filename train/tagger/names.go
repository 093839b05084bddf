package tagger

import (
	"fmt"

	"github.com/sugarme/gotch"
)

// Names of the stages this package registers (stage.go); other code names
// the stages through these constants.
const (
	StageTrain    = "train.tagger"
	StagePredict  = "train.predict"
	StageEvaluate = "train.evaluate"
)

// ParseDevice reads a stage device or flag: "cpu" or "cuda:N".
func ParseDevice(s string) (gotch.Device, error) {
	if s == "" || s == "cpu" {
		return gotch.CPU, nil
	}
	var n uint
	if _, err := fmt.Sscanf(s, "cuda:%d", &n); err != nil {
		return gotch.CPU, fmt.Errorf("device %q: want cpu or cuda:N", s)
	}
	if !gotch.CUDA.IsAvailable() {
		return gotch.CPU, fmt.Errorf("device %s: this libtorch has no CUDA", s)
	}
	return gotch.CudaBuilder(n), nil
}
