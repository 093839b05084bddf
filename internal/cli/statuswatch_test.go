package cli

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nerflow/nerflow/pipeline/engine"
)

// screen is a terminal just capable enough for the status redraw: printable
// runes wrap at the width, \n and \r move the cursor, ESC[nA moves it up
// (never above the first row) and ESC[J erases from it to the end.
type screen struct {
	width, height int
	rows          [][]rune
	row, col      int
}

func (s *screen) Write(p []byte) (int, error) {
	csi := regexp.MustCompile(`^\x1b\[(\d*)([AJ])`)
	text := string(p)
	for len(text) > 0 {
		if m := csi.FindStringSubmatch(text); m != nil {
			text = text[len(m[0]):]
			n, _ := strconv.Atoi(m[1])
			if m[2] == "A" {
				s.row = max(s.row-max(n, 1), 0)
			} else {
				s.rows = s.rows[:min(s.row+1, len(s.rows))]
				if s.row < len(s.rows) {
					s.rows[s.row] = s.rows[s.row][:min(s.col, len(s.rows[s.row]))]
				}
			}
			continue
		}
		r := []rune(text)[0]
		text = text[len(string(r)):]
		switch r {
		case '\n':
			s.row, s.col = s.row+1, 0
		case '\r':
			s.col = 0
		case '\x1b':
			return 0, fmt.Errorf("unexpected escape sequence at %q", text)
		default:
			if s.col == s.width {
				s.row, s.col = s.row+1, 0
			}
			for len(s.rows) <= s.row {
				s.rows = append(s.rows, nil)
			}
			line := s.rows[s.row]
			for len(line) <= s.col {
				line = append(line, ' ')
			}
			line[s.col] = r
			s.rows[s.row] = line
			s.col++
		}
		if s.row >= s.height {
			// Scrolling: the top row leaves the screen.
			s.rows = s.rows[1:]
			s.row--
		}
	}
	return len(p), nil
}

func (s *screen) String() string {
	var lines []string
	for _, r := range s.rows {
		lines = append(lines, strings.TrimRight(string(r), " "))
	}
	return strings.TrimRight(strings.Join(lines, "\n"), "\n")
}

func watchedRun(states ...string) *engine.RunStatus {
	st := &engine.RunStatus{ID: "r1", Name: "demo", State: engine.Running}
	for i, s := range states {
		st.Nodes = append(st.Nodes, engine.NodeStatus{ID: fmt.Sprintf("node%d", i), Stage: "test.slow", State: s})
	}
	return st
}

func renderTable(w io.Writer, st *engine.RunStatus) error {
	fmt.Fprintf(w, "run %s (%s): %s, %s\n", st.ID, st.Name, st.State, countsLine(st))
	return printNodeTable(w, st, false)
}

// On a terminal every poll replaces the previous status: whatever the
// frames' lengths and however their long lines wrap, the screen shows the
// last frame alone, and what was printed before the watch stays.
func TestStatusWatchRedrawsInPlace(t *testing.T) {
	scr := &screen{width: 40, height: 30}
	fmt.Fprintln(scr, "$ nerflow status r1 --watch")
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	sw := &statusWatch{w: scr, tty: true, size: func() (int, int) { return 40, 30 }, now: func() time.Time { return clock },
		interval: 2 * time.Second, render: renderTable}
	frames := []*engine.RunStatus{
		watchedRun(engine.Running, engine.Pending, engine.Pending),
		watchedRun(engine.Done, engine.Running, engine.Running, engine.Pending), // longer
		watchedRun(engine.Done, engine.Done),                                    // shorter
	}
	frames[1].Nodes[1].Lost = true // a long state: the line wraps at 40 columns
	for i, st := range frames {
		final := i == len(frames)-1
		if final {
			st.State = engine.Succeeded
		}
		if err := sw.update(st, final); err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		want.WriteString("$ nerflow status r1 --watch\n")
		_ = renderTable(&want, st)
		if !final {
			want.WriteString("\nevery 2s, 03:04:05 (Ctrl-C to stop watching; the run goes on)\n")
		}
		// The screen wraps what the frame does not.
		var wrapped []string
		for _, line := range strings.Split(strings.TrimRight(want.String(), "\n"), "\n") {
			r := []rune(line)
			for len(r) > 40 {
				wrapped = append(wrapped, strings.TrimRight(string(r[:40]), " "))
				r = r[40:]
			}
			wrapped = append(wrapped, strings.TrimRight(string(r), " "))
		}
		if got := scr.String(); got != strings.Join(wrapped, "\n") {
			t.Fatalf("after frame %d the screen shows\n%s\nwant\n%s", i+1, got, strings.Join(wrapped, "\n"))
		}
	}
}

// Piped, the watch prints one line per change of a node, however many
// polls saw the same status, names lost workers and re-runs, and ends
// with the whole status.
func TestStatusWatchPipedPrintsChanges(t *testing.T) {
	var out bytes.Buffer
	sw := newStatusWatch(&out, time.Second, renderTable)
	sw.now = func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	started := time.Now().Add(-3 * time.Second)
	polls := []*engine.RunStatus{watchedRun(engine.Pending, engine.Pending)}
	for range 50 {
		st := watchedRun(engine.Running, engine.Pending)
		st.Nodes[0].StartedAt = &started
		polls = append(polls, st)
	}
	lost := watchedRun(engine.Running, engine.Pending)
	lost.Nodes[0].Lost = true
	requeued := watchedRun(engine.Queued, engine.Pending)
	requeued.Nodes[0].Attempt = 1
	rerun := watchedRun(engine.Running, engine.Pending)
	rerun.Nodes[0].Attempt, rerun.Nodes[0].StartedAt = 1, &started
	end := watchedRun(engine.Done, engine.Failed)
	end.State = engine.Failed
	finished := started.Add(1500 * time.Millisecond)
	end.Nodes[0].Attempt, end.Nodes[0].StartedAt, end.Nodes[0].FinishedAt = 1, &started, &finished
	end.Nodes[1].StartedAt, end.Nodes[1].FinishedAt, end.Nodes[1].Error = &started, &finished, "no gazetteer"
	polls = append(polls, lost, lost, requeued, rerun, rerun, end)
	for i, st := range polls {
		if err := sw.update(st, i == len(polls)-1); err != nil {
			t.Fatal(err)
		}
	}
	got := out.String()
	changes := strings.Join([]string{
		"03:04:05 run r1 (demo): running, 2 nodes (2 pending)",
		"03:04:05 node0                    running",
		"03:04:05 node0                    worker lost, waiting to be re-run",
		"03:04:05 node0                    queued (attempt 2)",
		"03:04:05 node0                    running (attempt 2)",
		"03:04:05 node0                    done (attempt 2) in 1.5s",
		"03:04:05 node1                    failed in 1.5s: no gazetteer",
		"",
		"run r1 (demo): failed, 2 nodes (1 done, 1 failed)",
	}, "\n")
	if !strings.HasPrefix(got, changes+"\n") {
		t.Errorf("piped watch printed\n%s\nwant it to start with\n%s", got, changes)
	}
	if strings.Contains(got, "\x1b") {
		t.Errorf("piped watch printed escape sequences:\n%q", got)
	}
}

func TestRowsOf(t *testing.T) {
	for _, c := range []struct {
		text  string
		width int
		want  int
	}{
		{"a\nb\n", 80, 2},
		{strings.Repeat("x", 80) + "\n", 80, 1},
		{strings.Repeat("x", 81) + "\n", 80, 2},
		{strings.Repeat("é", 160) + "\n\n", 80, 3},
		{strings.Repeat("x", 500) + "\n", 0, 1},
	} {
		if got := rowsOf(c.text, c.width); got != c.want {
			t.Errorf("rowsOf(%d chars, %d) = %d, want %d", len(c.text), c.width, got, c.want)
		}
	}
}
