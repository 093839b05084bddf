// Package teststages registers small stages made for testing the pipeline
// engine: sources, joins, fan-in, a flaky stage, a failing stage and a slow
// resumable one. Importing the package registers them (names start with
// "test."). The nerflow binary includes them only when built with
// `-tags nerflow_teststages`, so production binaries do not list them.
package teststages

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nerflow/nerflow/stages"
)

var (
	mu    sync.Mutex
	execs = map[string]int{}
)

// Executions returns how many times stage name ran in this process.
func Executions(name string) int {
	mu.Lock()
	defer mu.Unlock()
	return execs[name]
}

// ResetExecutions zeroes the counters.
func ResetExecutions() {
	mu.Lock()
	defer mu.Unlock()
	clear(execs)
}

func count(c *stages.Context, name string) {
	mu.Lock()
	execs[name]++
	mu.Unlock()
	c.Log.Debug("test stage running", "stage", name, "attempt", c.Attempt)
}

func init() {
	stages.Register(stages.Stage{
		Name: "test.emit", Version: 1,
		Doc:     "Writes its text parameter as out.txt.",
		Params:  []stages.Param{stages.StringParam("text", "hello", "text to write")},
		Outputs: []stages.Port{{Name: "out", Kind: "text"}},
		Run: func(c *stages.Context) error {
			count(c, "test.emit")
			return c.Output("out").WriteFile("out.txt", []byte(c.Params.String("text")))
		},
	})
	stages.Register(stages.Stage{
		Name: "test.concat", Version: 1,
		Doc: "Concatenates the out.txt of its inputs, joined by sep, then appends suffix.",
		Params: []stages.Param{
			stages.StringParam("sep", "+", "separator"),
			stages.StringParam("suffix", "", "text appended at the end"),
		},
		Inputs:  []stages.Port{{Name: "in", Kind: "text", Many: true}},
		Outputs: []stages.Port{{Name: "out", Kind: "text"}},
		Run: func(c *stages.Context) error {
			count(c, "test.concat")
			var parts []string
			for _, in := range c.Inputs("in") {
				b, err := in.ReadFile("out.txt")
				if err != nil {
					return err
				}
				parts = append(parts, string(b))
			}
			return c.Output("out").WriteFile("out.txt", []byte(strings.Join(parts, c.Params.String("sep"))+c.Params.String("suffix")))
		},
	})
	stages.Register(stages.Stage{
		Name: "test.seed", Version: 1,
		Doc: "Trains a pretend model: value = seed * scale + length of the optional input.",
		Params: []stages.Param{
			stages.IntParam("seed", 1, "random seed", stages.Range(0, 1<<31)),
			stages.FloatParam("scale", 1, "multiplier"),
		},
		Inputs:  []stages.Port{{Name: "in", Kind: "text", Optional: true}},
		Outputs: []stages.Port{{Name: "model", Kind: "checkpoint"}},
		Run: func(c *stages.Context) error {
			count(c, "test.seed")
			v := float64(c.Params.Int("seed")) * c.Params.Float("scale")
			if in := c.Input("in"); in != nil {
				b, err := in.ReadFile("out.txt")
				if err != nil {
					return err
				}
				v += float64(len(b))
			}
			return c.Output("model").WriteJSON("model.json", map[string]float64{"value": v})
		},
	})
	stages.Register(stages.Stage{
		Name: "test.sum", Version: 1,
		Doc:     "Sums the values of its models (the fan-in of test.seed).",
		Inputs:  []stages.Port{{Name: "models", Kind: "checkpoint", Many: true}},
		Outputs: []stages.Port{{Name: "total", Kind: "report"}},
		Run: func(c *stages.Context) error {
			count(c, "test.sum")
			var total float64
			for _, in := range c.Inputs("models") {
				var m map[string]float64
				if err := in.ReadJSON("model.json", &m); err != nil {
					return err
				}
				total += m["value"]
			}
			return c.Output("total").WriteJSON("total.json", map[string]any{"total": total, "n": len(c.Inputs("models"))})
		},
	})
	stages.Register(stages.Stage{
		Name: "test.flaky", Version: 1,
		Doc: "Fails its first fail_times attempts, then copies its input.",
		Params: []stages.Param{
			stages.IntParam("fail_times", 1, "attempts that fail before one succeeds", stages.AtLeast(0)),
		},
		Inputs:  []stages.Port{{Name: "in", Kind: "text", Optional: true}},
		Outputs: []stages.Port{{Name: "out", Kind: "text"}},
		Retries: 3,
		Run: func(c *stages.Context) error {
			count(c, "test.flaky")
			if c.Attempt < c.Params.Int("fail_times") {
				return fmt.Errorf("flaky failure on attempt %d", c.Attempt)
			}
			text := "flaky ok after " + strconv.Itoa(c.Attempt) + " failures"
			if in := c.Input("in"); in != nil {
				b, err := in.ReadFile("out.txt")
				if err != nil {
					return err
				}
				text = string(b)
			}
			return c.Output("out").WriteFile("out.txt", []byte(text))
		},
	})
	stages.Register(stages.Stage{
		Name: "test.fail", Version: 1,
		Doc:     "Always fails with its message.",
		Params:  []stages.Param{stages.StringParam("message", "deliberate failure", "error message")},
		Inputs:  []stages.Port{{Name: "in", Kind: "text", Optional: true}},
		Outputs: []stages.Port{{Name: "out", Kind: "text"}},
		Retries: 1,
		Run: func(c *stages.Context) error {
			count(c, "test.fail")
			return fmt.Errorf("%s", c.Params.String("message"))
		},
	})
	stages.Register(stages.Stage{
		Name: "test.slow", Version: 1,
		Doc: "Counts to steps, sleeping step_time per step and checkpointing after each; resumes from its checkpoint.",
		Params: []stages.Param{
			stages.IntParam("steps", 10, "number of steps", stages.AtLeast(1)),
			stages.DurationParam("step_time", 100*time.Millisecond, "time per step"),
		},
		Inputs:    []stages.Port{{Name: "in", Kind: "text", Optional: true}},
		Outputs:   []stages.Port{{Name: "result", Kind: "report"}},
		Resumable: true,
		Retries:   3,
		Run:       slow,
	})
	stages.Register(stages.Stage{
		Name: "test.fill", Version: 1,
		Doc: "Writes an output of size bytes (streamed in 64 KiB pieces), for filling a disk.",
		Params: []stages.Param{stages.IntParam("size", 1<<20, "bytes to write", stages.AtLeast(1)),
			stages.BoolParam("scratch", false, "write the file in the work directory first, then add it")},
		Inputs:  []stages.Port{{Name: "in", Kind: "text", Optional: true}},
		Outputs: []stages.Port{{Name: "out"}},
		Run: func(c *stages.Context) error {
			count(c, "test.fill")
			var w io.WriteCloser
			var err error
			var scratch string
			if c.Params.Bool("scratch") {
				scratch = filepath.Join(c.WorkDir(), "fill.bin")
				w, err = os.Create(scratch)
			} else {
				w, err = c.Output("out").Create("fill.bin")
			}
			if err != nil {
				return err
			}
			piece := make([]byte, 64<<10)
			for left := c.Params.Int("size"); left > 0; left -= len(piece) {
				if _, err := w.Write(piece[:min(left, len(piece))]); err != nil {
					w.Close()
					return err
				}
			}
			if err := w.Close(); err != nil || !c.Params.Bool("scratch") {
				return err
			}
			return c.Output("out").AddFile("fill.bin", scratch)
		},
	})
	stages.Register(stages.Stage{
		Name: "test.noop", Version: 1,
		Doc:     "Writes a tiny output naming i and its inputs' digests; for measuring the engine's own overhead.",
		Params:  []stages.Param{stages.IntParam("i", 0, "distinguishes otherwise identical nodes")},
		Inputs:  []stages.Port{{Name: "in", Many: true, Optional: true}},
		Outputs: []stages.Port{{Name: "out"}},
		Run: func(c *stages.Context) error {
			count(c, "test.noop")
			// The output names the inputs, so that every node of a chain
			// has its own content (equal content would be a cache hit).
			text := strconv.Itoa(c.Params.Int("i"))
			for _, in := range c.Inputs("in") {
				text += " " + in.Digest
			}
			return c.Output("out").WriteFile("i", []byte(text))
		},
	})
}

type slowState struct {
	Step        int64 `json:"step"`
	ResumedFrom int64 `json:"resumed_from"`
}

func slow(c *stages.Context) error {
	count(c, "test.slow")
	steps := int64(c.Params.Int("steps"))
	dir := filepath.Join(c.WorkDir(), "ckpt")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var st slowState
	step, ok, err := c.LoadCheckpoint(dir)
	if err != nil {
		return err
	}
	if ok {
		b, err := os.ReadFile(filepath.Join(dir, "state.json"))
		if err != nil {
			return fmt.Errorf("reading checkpoint: %w", err)
		}
		if err := json.Unmarshal(b, &st); err != nil {
			return fmt.Errorf("reading checkpoint: %w", err)
		}
		if st.Step != step {
			return fmt.Errorf("checkpoint step %d but state says %d", step, st.Step)
		}
		st.ResumedFrom = step
	}
	for st.Step < steps {
		select {
		case <-c.Done():
			return c.Err()
		case <-time.After(c.Params.Duration("step_time")):
		}
		st.Step++
		b, _ := json.Marshal(st)
		if err := os.WriteFile(filepath.Join(dir, "state.json"), b, 0o644); err != nil {
			return err
		}
		if err := c.SaveCheckpoint(dir, st.Step); err != nil {
			return err
		}
		c.Progress(st.Step, steps, "step "+strconv.FormatInt(st.Step, 10))
	}
	return c.Output("result").WriteJSON("result.json", st)
}
