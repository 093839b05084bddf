package cli

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/nerflow/nerflow/pipeline/engine"
)

func init() {
	register(func(a *app) *cobra.Command {
		var (
			asJSON  bool
			verbose bool
			watch   time.Duration
		)
		cmd := &cobra.Command{
			Use:   "status RUN",
			Short: "Show a run's state, node by node",
			Long: `Status prints the state of each node of a run (pending, queued, running,
done, cached, failed, cancelled), its attempt, duration, progress and
outputs, and the error of failed nodes. Live runs are read from Redis;
finished and embedded runs from their manifest in the store.

--watch follows the run until it is over: on a terminal the status is
redrawn in place every interval; piped, one line is printed per change of a
node (started, finished, worker lost, re-run) and the whole status at the
end. The exit status then says whether the run succeeded.`,
			Example: `  nerflow status RUN --watch
  nerflow status RUN --watch=10s | tee run.log`,
			Args: cobra.RangeArgs(1, 2),
			RunE: func(cmd *cobra.Command, args []string) error {
				ctx := cmd.Context()
				e, closeAll, err := a.clusterEngine(ctx, false)
				if err != nil {
					return err
				}
				defer closeAll()
				interval, err := watchInterval(cmd, args, watch)
				if err != nil {
					return err
				}
				out := cmd.OutOrStdout()
				show := func(out io.Writer, st *engine.RunStatus) error {
					if asJSON {
						return writeJSON(out, st)
					}
					fmt.Fprintf(out, "run %s (%s): %s, %s\n", st.ID, st.Name, st.State, countsLine(st))
					for _, w := range st.Warnings {
						fmt.Fprintf(out, "warning: %s\n", w)
					}
					if st.Error != "" {
						fmt.Fprintf(out, "error: %s\n", st.Error)
					}
					return printNodeTable(out, st, verbose)
				}
				if interval > 0 && !asJSON {
					sw := newStatusWatch(out, interval, show)
					var shown error
					final, err := e.Wait(ctx, args[0], interval, func(st *engine.RunStatus) {
						if shown == nil {
							shown = sw.update(st, st.State != engine.Running)
						}
					})
					if err != nil {
						return err
					}
					if shown != nil {
						return fmt.Errorf("showing the status: %w", shown)
					}
					if final.State != engine.Succeeded {
						return fmt.Errorf("run %s %s", final.ID, final.State)
					}
					return nil
				}
				if interval > 0 {
					// JSON: one document per poll, for programs that follow a run.
					_, err := e.Wait(ctx, args[0], interval, func(st *engine.RunStatus) { _ = show(out, st) })
					return err
				}
				st, err := e.Status(ctx, args[0])
				if err != nil {
					return err
				}
				return show(out, st)
			},
		}
		cmd.Flags().BoolVar(&asJSON, "json", false, "print the status as JSON")
		cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "show artifact locations and the last error of every node")
		cmd.Flags().DurationVar(&watch, "watch", 0, "follow the run until it is over, polling every interval (--watch alone: "+defaultWatch.String()+"); redrawn in place on a terminal, one line per change otherwise")
		cmd.Flags().Lookup("watch").NoOptDefVal = defaultWatch.String()
		return cmd
	})

	register(func(a *app) *cobra.Command {
		var (
			asJSON bool
			limit  int
		)
		cmd := &cobra.Command{
			Use:   "runs",
			Short: "List runs, newest first",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				ctx := cmd.Context()
				e, closeAll, err := a.clusterEngine(ctx, false)
				if err != nil {
					return err
				}
				defer closeAll()
				runs, err := e.Runs(ctx, limit)
				if err != nil {
					return err
				}
				out := cmd.OutOrStdout()
				if asJSON {
					return writeJSON(out, runs)
				}
				tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "RUN\tNAME\tSTATE\tCREATED\tDURATION")
				for _, r := range runs {
					d := "-"
					if r.FinishedAt != nil {
						d = shortDuration(r.FinishedAt.Sub(r.CreatedAt))
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.ID, r.Name, r.State, r.CreatedAt.Local().Format("2006-01-02 15:04:05"), d)
				}
				return tw.Flush()
			},
		}
		cmd.Flags().BoolVar(&asJSON, "json", false, "print the list as JSON")
		cmd.Flags().IntVar(&limit, "limit", 50, "show at most this many runs (0: all)")
		return cmd
	})
}
