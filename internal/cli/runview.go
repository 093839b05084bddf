package cli

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/term"

	"github.com/nerflow/nerflow/pipeline/engine"
	"github.com/nerflow/nerflow/stages"
)

// runView shows a run's progress while it runs. On a terminal it draws
// progress bars (mpb): one for the run and one per running node, with the
// stage's own progress when it reports some; finished nodes scroll above
// the bars. Elsewhere (CI logs, pipes) it prints one line per node state
// change.
type runView struct {
	out  io.Writer // where lines go: the bar container or the plain writer
	tty  bool
	p    *mpb.Progress
	run  *mpb.Bar
	bars map[string]*nodeBar
	seen map[string]string // node -> last state shown

	mu    sync.Mutex
	label string
}

type nodeBar struct {
	bar  *mpb.Bar
	note string
}

func newRunView(w *os.File, enabled bool) *runView {
	v := &runView{out: w, bars: map[string]*nodeBar{}, seen: map[string]string{}}
	if enabled && term.IsTerminal(int(w.Fd())) {
		v.tty = true
		v.p = mpb.New(mpb.WithOutput(w), mpb.WithRefreshRate(150*time.Millisecond), mpb.WithWidth(100))
		v.out = v.p
	}
	return v
}

// Writer is where logs should go so that they do not tear the bars.
func (v *runView) Writer() io.Writer { return v.out }

func (v *runView) update(st *engine.RunStatus) {
	counts := st.Counts()
	finished := counts[engine.Done] + counts[engine.Cached] + counts[engine.Failed] + counts[engine.Cancelled]
	if v.tty && v.run == nil {
		v.run = v.p.AddBar(int64(len(st.Nodes)), mpb.BarPriority(1<<20),
			mpb.PrependDecorators(decor.Name("run "+st.Name, decor.WC{W: 24, C: decor.DindentRight}), decor.CountersNoUnit("%d/%d nodes", decor.WC{W: 14})),
			mpb.AppendDecorators(decor.Any(func(decor.Statistics) string { v.mu.Lock(); defer v.mu.Unlock(); return v.label }), decor.Elapsed(decor.ET_STYLE_GO, decor.WC{W: 8})))
	}
	v.mu.Lock()
	v.label = fmt.Sprintf("  %d running, %d queued ", counts[engine.Running], counts[engine.Queued])
	v.mu.Unlock()
	for _, n := range st.Nodes {
		prev := v.seen[n.ID]
		if prev == n.State && n.State != engine.Running {
			continue
		}
		v.seen[n.ID] = n.State
		switch {
		case n.State == engine.Running:
			v.showRunning(n)
		case engine.Finished(n.State) && prev != n.State:
			v.finish(n)
		}
	}
	if v.run != nil {
		v.run.SetCurrent(int64(finished))
	}
}

func (v *runView) showRunning(n engine.NodeStatus) {
	if !v.tty {
		if v.seen[n.ID+"#started"] == "" {
			v.seen[n.ID+"#started"] = "y"
			fmt.Fprintf(v.out, "running    %s (%s)\n", n.ID, n.Stage)
		}
		return
	}
	nb := v.bars[n.ID]
	if nb == nil {
		nb = &nodeBar{}
		nb.bar = v.p.AddBar(0, mpb.BarRemoveOnComplete(),
			mpb.PrependDecorators(decor.Name("  "+n.ID, decor.WC{W: 24, C: decor.DindentRight}), decor.Percentage(decor.WC{W: 6})),
			mpb.AppendDecorators(decor.Any(func(decor.Statistics) string { v.mu.Lock(); defer v.mu.Unlock(); return nb.note })))
		v.bars[n.ID] = nb
	}
	if p := n.Progress; p != nil && p.Total > 0 {
		nb.bar.SetTotal(p.Total, false)
		nb.bar.SetCurrent(min(p.Done, p.Total-1)) // complete only when the node is
	}
	v.mu.Lock()
	nb.note = "  " + progressNote(n.Progress) + " " + shortDuration(n.Duration())
	v.mu.Unlock()
}

func (v *runView) finish(n engine.NodeStatus) {
	if nb := v.bars[n.ID]; nb != nil {
		nb.bar.SetTotal(-1, true)
		delete(v.bars, n.ID)
	}
	line := fmt.Sprintf("%-10s %s", n.State, n.ID)
	if n.StartedAt != nil && n.State != engine.Cancelled {
		line += " (" + shortDuration(n.Duration()) + ")"
	}
	if n.State == engine.Failed && n.Error != "" {
		line += ": " + n.Error
	}
	fmt.Fprintln(v.out, line)
}

// close removes the bars; call it before printing the summary.
func (v *runView) close() {
	if !v.tty {
		return
	}
	for id, nb := range v.bars {
		nb.bar.Abort(true)
		delete(v.bars, id)
	}
	if v.run != nil {
		v.run.Abort(false)
	}
	v.p.Wait()
}

func progressNote(p *stages.ProgressUpdate) string {
	if p == nil {
		return ""
	}
	s := p.Note
	if p.Total > 0 {
		s = fmt.Sprintf("%d/%d %s", p.Done, p.Total, p.Note)
	} else if p.Done > 0 {
		s = fmt.Sprintf("%d %s", p.Done, p.Note)
	}
	return strings.TrimSpace(s)
}

func shortDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// printNodeTable prints one line per node: state, duration, outputs.
func printNodeTable(w io.Writer, st *engine.RunStatus, verbose bool) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTAGE\tSTATE\tATTEMPT\tDURATION\tPROGRESS\tOUTPUTS")
	for _, n := range st.Nodes {
		attempt := "-"
		if n.StartedAt != nil {
			attempt = fmt.Sprint(n.Attempt + 1)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.ID, n.Stage, n.Display(), attempt, shortDuration(n.Duration()),
			orDash(progressNote(n.Progress)), orDash(outputsSummary(n.Outputs, verbose)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range st.Nodes {
		if n.Error != "" && (n.State == engine.Failed || verbose) {
			fmt.Fprintf(w, "error in %s: %s\n", n.ID, n.Error)
		}
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func outputsSummary(outs map[string]stages.Artifact, verbose bool) string {
	names := make([]string, 0, len(outs))
	for name := range outs {
		names = append(names, name)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, name := range names {
		a := outs[name]
		s := fmt.Sprintf("%s=%s (%s)", name, engine.Short(strings.TrimPrefix(a.Digest, "sha256:")), filesSummary(a))
		if verbose {
			s += " at " + a.Prefix
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

func filesSummary(a stages.Artifact) string {
	if len(a.Files) == 1 {
		return fmt.Sprintf("%s, %s", a.Files[0].Name, bytesString(a.Files[0].Size))
	}
	return fmt.Sprintf("%d files, %s", len(a.Files), bytesString(a.Size()))
}

func bytesString(n int64) string { return humanize.IBytes(uint64(n)) }
