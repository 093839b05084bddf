package kit

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/nerflow/nerflow/stages"
)

// StageOptions are the FitOptions of a training that a pipeline stage
// runs: its state in the stage's work directory (state/), restored from the
// stage's last checkpoint when an attempt replaces a dead worker's (then
// Resume is set), a checkpoint through the stage after every epoch, and
// progress reported to the stage; resumed is the number of epochs the
// restored checkpoint holds (0 for a fresh start). what names the training
// in the log.
//
// Checkpoints are best effort: a store hiccup (or an execution without
// checkpoints) must not end hours of training, so a failed save is logged
// once and the run goes on; a later attempt resumes from an older
// checkpoint or starts afresh.
func StageOptions(c *stages.Context, what string) (o FitOptions, resumed int, err error) {
	state := filepath.Join(c.WorkDir(), "state")
	if err := os.MkdirAll(state, 0o755); err != nil {
		return FitOptions{}, 0, err
	}
	epoch, ok, err := c.LoadCheckpoint(state)
	if err != nil {
		return FitOptions{}, 0, err
	}
	o = FitOptions{Log: c.Log, StateDir: state}
	if ok {
		c.Log.Info("resuming "+what, "epochs_done", epoch)
		o.Resume, resumed = state, int(epoch)
	}
	warned := false
	o.Checkpoint = func(dir string, epoch int) error {
		if err := c.SaveCheckpoint(dir, int64(epoch)); err != nil && !warned {
			c.Log.Warn("no checkpoint", "epoch", epoch, "err", err)
			warned = true
		}
		return nil
	}
	o.Progress = func(p Progress) {
		c.Progress(int64(p.Step), int64(p.Steps), fmt.Sprintf("epoch %d/%d, loss %.4f, %.0f tokens/s", p.Epoch, p.Epochs, p.Loss, p.TokensPerSec))
	}
	return o, resumed, nil
}
