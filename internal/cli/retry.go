package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func init() {
	register(func(a *app) *cobra.Command {
		return &cobra.Command{
			Use:   "retry RUN",
			Short: "Re-run the failed and cancelled nodes of a run, reusing everything cached",
			Long: `Retry sets the failed and cancelled nodes of a finished run back to pending and
enqueues those whose parents are done. Finished nodes are kept, and re-run
nodes whose outputs are in the store are cached rather than executed.`,
			Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				ctx := cmd.Context()
				e, closeAll, err := a.clusterEngine(ctx, true)
				if err != nil {
					return err
				}
				defer closeAll()
				n, err := e.Retry(ctx, args[0])
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "run %s: %d nodes set to run again\n", args[0], n)
				return err
			},
		}
	})
}
