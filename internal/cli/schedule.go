package cli

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/nerflow/nerflow/schedule"
)

// withSchedules runs fn with the schedules of the configured Redis.
func (a *app) withSchedules(cmd *cobra.Command, fn func(ctx context.Context, store *schedule.Store) error) error {
	ctx := cmd.Context()
	rdb, err := a.redisClient(ctx)
	if err != nil {
		return err
	}
	defer rdb.Close()
	return fn(ctx, schedule.NewStore(rdb, a.cfg.Redis.Namespace))
}

func init() {
	register(func(a *app) *cobra.Command {
		cmd := &cobra.Command{
			Use:   "schedule",
			Short: "Run specs on cron schedules (add, list, rm, pause, resume, history)",
			Long: `Schedules live in Redis and are fired by the scheduler processes
(nerflow scheduler; run one or several: each tick fires exactly once).

At each tick the spec file is read again. The tick is skipped while the
schedule's previous run is still running, and recorded as up to date (no run)
when the spec and the content of every input dataset are those of the
schedule's last successful run. Otherwise a run is submitted.

Missed ticks (every scheduler down): --missed run-once (default) fires once
for the latest missed tick; --missed skip fires nothing until the next tick.
A tick more than a minute late counts as missed. Cron expressions have five
fields or a descriptor (@daily, @every 6h) and are evaluated in UTC unless
prefixed with CRON_TZ=Zone.`,
		}
		cmd.AddCommand(scheduleAdd(a), scheduleList(a), scheduleRm(a), schedulePause(a, true), schedulePause(a, false), scheduleHistory(a))
		return cmd
	})

	register(func(a *app) *cobra.Command {
		var poll time.Duration
		cmd := &cobra.Command{
			Use:   "scheduler",
			Short: "Fire the cron schedules (run as many as you like: each tick fires once)",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				ctx := cmd.Context()
				e, closeAll, err := a.clusterEngine(ctx, true)
				if err != nil {
					return err
				}
				defer closeAll()
				return a.withSchedules(cmd, func(ctx context.Context, store *schedule.Store) error {
					return schedule.New(store, e, schedule.WithLogger(a.log), schedule.WithPollInterval(poll)).Run(ctx)
				})
			},
		}
		cmd.Flags().DurationVar(&poll, "poll-interval", time.Second, "how often the schedules are looked at")
		return cmd
	})
}

func scheduleAdd(a *app) *cobra.Command {
	var (
		cronExpr string
		sets     []string
		missed   string
	)
	cmd := &cobra.Command{
		Use:     "add NAME --cron EXPR SPEC.yaml [--set ...]",
		Short:   "Add a schedule",
		Example: `  nerflow schedule add nightly --cron "0 2 * * *" examples/conll03-distant.yaml --set gce.epochs=3`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withSchedules(cmd, func(ctx context.Context, store *schedule.Store) error {
				s := schedule.Schedule{Name: args[0], Cron: cronExpr, SpecFile: args[1], Overrides: sets, Missed: missed}
				if err := store.Add(ctx, s); err != nil {
					return err
				}
				c, _ := schedule.ParseCron(cronExpr)
				fmt.Fprintf(cmd.OutOrStdout(), "schedule %s added; next run %s\n", args[0], c.Next(time.Now().UTC()).Format(time.RFC3339))
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&cronExpr, "cron", "", `cron expression, e.g. "0 2 * * *" or @daily (required)`)
	_ = cmd.MarkFlagRequired("cron")
	cmd.Flags().StringVar(&missed, "missed", schedule.MissedRunOnce, "missed-tick policy: run-once or skip")
	addSetFlag(cmd, &sets)
	return cmd
}

func scheduleList(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List schedules with their next tick and last outcome",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withSchedules(cmd, func(ctx context.Context, store *schedule.Store) error {
				list, err := store.List(ctx)
				if err != nil {
					return err
				}
				out := cmd.OutOrStdout()
				if asJSON {
					return writeJSON(out, list)
				}
				tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "SCHEDULE\tCRON\tSPEC\tNEXT\tLAST\tRUN")
				for _, e := range list {
					next := "paused"
					if !e.Paused {
						next = e.Next.Format("2006-01-02 15:04")
					}
					last, run := "-", "-"
					if e.State.Last != nil {
						last = e.State.Last.Outcome + " " + e.State.Last.Tick.Format("01-02 15:04")
						run = orDash(e.State.Last.Run)
					}
					fmt.Fprintf(tw, "%s\t%s\t%s%s\t%s\t%s\t%s\n", e.Name, e.Cron, e.SpecFile, overridesNote(e.Overrides), next, last, run)
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func scheduleRm(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "rm NAME",
		Short: "Remove a schedule (its runs stay)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withSchedules(cmd, func(ctx context.Context, store *schedule.Store) error {
				s, st, err := store.Get(ctx, args[0])
				if err != nil {
					return err
				}
				if err := store.Remove(ctx, args[0]); err != nil {
					return err
				}
				last := "it never fired"
				if st != nil && st.Last != nil {
					last = "last tick " + st.Last.Tick.Format("2006-01-02 15:04") + ": " + st.Last.Outcome
					if st.Last.Run != "" {
						last += " (run " + st.Last.Run + ")"
					}
				}
				fmt.Fprintf(cmd.OutOrStdout(), "removed schedule %s (%s, %s%s; %s); its runs and models stay\n",
					s.Name, s.Cron, s.SpecFile, overridesNote(s.Overrides), last)
				return nil
			})
		},
	}
}

func schedulePause(a *app, pause bool) *cobra.Command {
	use, short := "resume NAME", "Resume a paused schedule from now (ticks that fell while paused are not caught up)"
	if pause {
		use, short = "pause NAME", "Stop a schedule from firing"
	}
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withSchedules(cmd, func(ctx context.Context, store *schedule.Store) error {
				if pause {
					if err := store.Pause(ctx, args[0]); err != nil {
						return err
					}
					fmt.Fprintf(cmd.OutOrStdout(), "schedule %s paused\n", args[0])
					return nil
				}
				if err := store.Resume(ctx, args[0]); err != nil {
					return err
				}
				if s, _, err := store.Get(ctx, args[0]); err == nil {
					if c, err := schedule.ParseCron(s.Cron); err == nil {
						fmt.Fprintf(cmd.OutOrStdout(), "schedule %s resumed; next run %s\n", args[0], c.Next(time.Now().UTC()).Format(time.RFC3339))
						return nil
					}
				}
				fmt.Fprintf(cmd.OutOrStdout(), "schedule %s resumed\n", args[0])
				return nil
			})
		},
	}
}

func scheduleHistory(a *app) *cobra.Command {
	var (
		asJSON bool
		limit  int
	)
	cmd := &cobra.Command{
		Use:   "history NAME",
		Short: "Show what became of a schedule's latest ticks",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withSchedules(cmd, func(ctx context.Context, store *schedule.Store) error {
				if _, _, err := store.Get(ctx, args[0]); err != nil {
					return err
				}
				evs, err := store.History(ctx, args[0], limit)
				if err != nil {
					return err
				}
				out := cmd.OutOrStdout()
				if asJSON {
					return writeJSON(out, evs)
				}
				tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "TICK\tOUTCOME\tRUN\tSCHEDULER\tDETAIL")
				for _, e := range evs {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Tick.Format("2006-01-02 15:04"), e.Outcome, orDash(e.Run), e.Scheduler, orDash(e.Detail))
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().IntVar(&limit, "limit", 20, "number of ticks shown")
	return cmd
}
