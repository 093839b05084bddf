package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/nerflow/nerflow/pipeline/engine"
)

// defaultWatch is the interval of a bare `status --watch`.
const defaultWatch = 2 * time.Second

// statusWatch shows a run's status over time. On a terminal each poll
// redraws the status in place (the previous frame is erased), so that the
// screen always holds one status; elsewhere (pipes, CI logs) it prints one
// line per change of a node (state, attempt, lost worker) and the whole
// status once the run is over, so that a log grows with what happened, not
// with the number of polls.
type statusWatch struct {
	w        io.Writer
	tty      bool
	size     func() (width, height int) // the terminal's, on a terminal
	now      func() time.Time
	interval time.Duration
	render   func(io.Writer, *engine.RunStatus) error

	rows  int               // terminal rows the last frame took
	shown map[string]string // node -> what was last said of it (piped)
	title bool              // the run's line was printed (piped)
}

func newStatusWatch(w io.Writer, interval time.Duration, render func(io.Writer, *engine.RunStatus) error) *statusWatch {
	sw := &statusWatch{w: w, now: time.Now, interval: interval, render: render, shown: map[string]string{}}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		sw.tty = true
		sw.size = func() (int, int) {
			wd, ht, err := term.GetSize(int(f.Fd()))
			if err != nil {
				return 0, 0
			}
			return wd, ht
		}
	}
	return sw
}

// update shows st; final is set on the last status of the run.
func (sw *statusWatch) update(st *engine.RunStatus, final bool) error {
	if sw.tty {
		return sw.redraw(st, final)
	}
	return sw.lines(st, final)
}

func (sw *statusWatch) redraw(st *engine.RunStatus, final bool) error {
	var frame bytes.Buffer
	if err := sw.render(&frame, st); err != nil {
		return err
	}
	if !final {
		fmt.Fprintf(&frame, "\nevery %s, %s (Ctrl-C to stop watching; the run goes on)\n", sw.interval, sw.now().Format("15:04:05"))
	}
	var out bytes.Buffer
	if sw.rows > 0 {
		// Back to the first row of the previous frame, then erase from
		// there to the end of the screen.
		fmt.Fprintf(&out, "\r\x1b[%dA\x1b[J", sw.rows)
	}
	out.Write(frame.Bytes())
	width, height := sw.size()
	sw.rows = rowsOf(frame.String(), width)
	if height > 0 && sw.rows >= height {
		// Rows that scrolled off the top cannot be reached: moving up is
		// clamped at the screen's first row, which is where the redraw
		// then starts.
		sw.rows = height - 1
	}
	_, err := sw.w.Write(out.Bytes())
	return err
}

// rowsOf counts the terminal rows text takes at width columns (0: no
// wrapping), text ending with a newline.
func rowsOf(text string, width int) int {
	rows := 0
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		n := utf8.RuneCountInString(line)
		if width <= 0 || n <= width {
			rows++
			continue
		}
		rows += (n + width - 1) / width
	}
	return rows
}

// lines prints what changed since the last status, one line per node.
func (sw *statusWatch) lines(st *engine.RunStatus, final bool) error {
	if !sw.title {
		sw.title = true
		fmt.Fprintf(sw.w, "%s run %s (%s): %s, %s\n", sw.now().Format("15:04:05"), st.ID, st.Name, st.State, countsLine(st))
	}
	for _, n := range st.Nodes {
		said := n.Display()
		if n.Attempt > 0 {
			said += fmt.Sprintf(" (attempt %d)", n.Attempt+1)
		}
		if sw.shown[n.ID] == said {
			continue
		}
		first := sw.shown[n.ID] == ""
		sw.shown[n.ID] = said
		if first && (n.State == engine.Pending || n.State == engine.Queued) {
			continue // the start of every run: not news
		}
		line := fmt.Sprintf("%s %-24s %s", sw.now().Format("15:04:05"), n.ID, said)
		if engine.Finished(n.State) && n.StartedAt != nil && n.State != engine.Cancelled {
			line += " in " + shortDuration(n.Duration())
		}
		if n.State == engine.Failed && n.Error != "" {
			line += ": " + n.Error
		}
		if _, err := fmt.Fprintln(sw.w, line); err != nil {
			return err
		}
	}
	if final {
		fmt.Fprintln(sw.w)
		return sw.render(sw.w, st)
	}
	return nil
}

// watchInterval reads the interval of --watch. pflag takes `--watch 5s`
// (as opposed to --watch=5s) as a bare --watch followed by an argument,
// and people type it that way: a second argument that is a duration,
// after --watch, is its interval.
func watchInterval(cmd *cobra.Command, args []string, watch time.Duration) (time.Duration, error) {
	if len(args) < 2 {
		return watch, nil
	}
	d, err := time.ParseDuration(args[1])
	if !cmd.Flags().Changed("watch") || err != nil {
		return 0, fmt.Errorf("status takes one run, not %q too", args[1])
	}
	if d <= 0 {
		return 0, fmt.Errorf("--watch %s: the interval must be positive", args[1])
	}
	return d, nil
}
