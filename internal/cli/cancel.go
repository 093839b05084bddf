package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func init() {
	register(func(a *app) *cobra.Command {
		return &cobra.Command{
			Use:   "cancel RUN",
			Short: "Cancel a running run: pending nodes are cancelled, running ones interrupted",
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				ctx := cmd.Context()
				e, closeAll, err := a.clusterEngine(ctx, true)
				if err != nil {
					return err
				}
				defer closeAll()
				if err := e.Cancel(ctx, args[0], "cancelled by nerflow cancel"); err != nil {
					return err
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "run %s cancelled\n", args[0])
				return err
			},
		}
	})
}
