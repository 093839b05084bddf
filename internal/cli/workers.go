package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/nerflow/nerflow/workers"
)

func init() {
	register(func(a *app) *cobra.Command {
		var asJSON bool
		cmd := &cobra.Command{
			Use:   "workers",
			Short: "List the live workers of the cluster",
			Long: `Workers lists the workers whose heartbeat is live in Redis: name, host, device,
queues, how many of their slots run a node, their nerflow version, and the
nodes they run (as of their last heartbeat, at most 5 s old). A worker that
dies disappears within 10 s.`,
			Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				ctx := cmd.Context()
				rdb, err := a.redisClient(ctx)
				if err != nil {
					return err
				}
				defer rdb.Close()
				ws, err := workers.List(ctx, rdb, a.cfg.Redis.Namespace)
				if err != nil {
					return err
				}
				out := cmd.OutOrStdout()
				if asJSON {
					return writeJSON(out, ws)
				}
				if len(ws) == 0 {
					fmt.Fprintln(out, "no live workers")
					return nil
				}
				tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "WORKER\tDEVICE\tQUEUES\tBUSY\tVERSION\tUP\tRUNNING")
				for _, w := range ws {
					var running []string
					for _, n := range w.Active {
						running = append(running, n.Run+"/"+n.Node)
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\n", w.Name, orDash(w.Device), strings.Join(w.Queues, ","),
						len(w.Active), w.Concurrency, orDash(w.Version), shortDuration(time.Since(w.Started)), orDash(strings.Join(running, " ")))
				}
				return tw.Flush()
			},
		}
		cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
		return cmd
	})
}
