package cli

import (
	"fmt"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/nerflow/nerflow/gc"
	"github.com/nerflow/nerflow/registry"
)

func init() {
	register(func(a *app) *cobra.Command {
		var (
			dryRun  bool
			asJSON  bool
			verbose bool
			o       = gc.Options{}
		)
		cmd := &cobra.Command{
			Use:   "gc",
			Short: "Delete from the store what no kept run or model needs",
			Long: `Gc deletes the outputs, node records and checkpoints of old runs, the
manifests of runs beyond the newest --keep-runs of each pipeline name,
imported datasets nothing kept refers to, and shared files (word vectors
that models carry unchanged, stored once) that nothing kept lists. It keeps every registered model
version (its model, its evaluations' reports, the run that registered it and
the datasets of its lineage), the newest --keep-runs finished runs of each
pipeline with every output they show, runs that have not ended with what
they use, and anything written less than --min-age ago.

A run that has not ended and whose state cannot be read (an embedded run of
another process, Redis away) stops the collection; --dry-run still says what
would go. Deleting a node record makes its node a cache miss: the next run
that needs it computes it again.

With --dry-run nothing changes: gc lists what it would delete and the bytes.`,
			Example: `  nerflow gc --dry-run
  nerflow gc --keep-runs 5 --min-age 24h`,
			Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				ctx := cmd.Context()
				c, err := a.connect(ctx, false)
				if err != nil {
					return err
				}
				defer c.close()
				if a.cfg.Redis.Addr != "" {
					// Without a Redis server, the runs of other processes
					// are not known: they count as unreadable.
					o.Live = c.engine.Status
				}
				if !dryRun {
					// Runs the registry has not examined are kept; register
					// their models first so that they need not be.
					if _, err := registry.New(c.store, registry.WithLogger(a.log)).Sync(ctx); err != nil {
						return fmt.Errorf("registering the models of finished runs: %w", err)
					}
				}
				plan, err := gc.Make(ctx, c.store, o)
				if err != nil {
					return err
				}
				out := cmd.OutOrStdout()
				if asJSON && dryRun {
					return writeJSON(out, plan)
				}
				printPlan(cmd, plan, verbose)
				if dryRun {
					fmt.Fprintf(out, "dry run: would delete %d objects, %s; %s stay\n", plan.Objects(), bytesString(plan.Bytes), bytesString(plan.KeptBytes))
					return nil
				}
				deleted, err := plan.Apply(ctx, o)
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "deleted %d objects, %s; %s stay\n", plan.Objects(), bytesString(deleted), bytesString(plan.KeptBytes))
				return nil
			},
		}
		f := cmd.Flags()
		f.BoolVar(&dryRun, "dry-run", false, "say what would be deleted, delete nothing")
		f.BoolVar(&asJSON, "json", false, "with --dry-run, print the plan as JSON")
		f.BoolVarP(&verbose, "verbose", "v", false, "list every item deleted, not only the totals per kind")
		f.IntVar(&o.KeepRuns, "keep-runs", 3, "finished runs kept per pipeline name, newest first")
		f.DurationVar(&o.MinAge, "min-age", time.Hour, "objects written less than this long ago are kept")
		return cmd
	})
}

func printPlan(cmd *cobra.Command, p *gc.Plan, verbose bool) {
	out := cmd.OutOrStdout()
	type total struct {
		n     int
		bytes int64
	}
	kinds := map[string]*total{}
	for _, it := range p.Delete {
		t := kinds[it.Kind]
		if t == nil {
			t = &total{}
			kinds[it.Kind] = t
		}
		t.n++
		t.bytes += it.Bytes
	}
	names := make([]string, 0, len(kinds))
	for k := range kinds {
		names = append(names, k)
	}
	sort.Strings(names)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DELETE\tCOUNT\tSIZE")
	for _, k := range names {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", k, kinds[k].n, bytesString(kinds[k].bytes))
	}
	_ = tw.Flush()
	if verbose {
		for _, it := range p.Delete {
			fmt.Fprintf(out, "  %s %s (%s): %s\n", it.Kind, it.Prefix, bytesString(it.Bytes), it.Why)
		}
	}
	if len(p.KeptRuns) == 1 {
		fmt.Fprint(out, "kept: 1 run with its outputs")
	} else {
		fmt.Fprintf(out, "kept: %d runs with their outputs", len(p.KeptRuns))
	}
	if len(p.LiveRuns) > 0 {
		fmt.Fprintf(out, ", %d not ended", len(p.LiveRuns))
	}
	fmt.Fprintf(out, "; objects written since %s\n", p.Cutoff.Local().Format("2006-01-02 15:04:05"))
	for _, id := range p.Unreadable {
		fmt.Fprintf(out, "warning: run %s has not ended and its state cannot be read: nothing is deleted while it lasts\n", id)
	}
}
