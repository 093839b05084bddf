package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nerflow/nerflow/internal/version"
)

func init() {
	register(func(*app) *cobra.Command {
		return &cobra.Command{
			Use:   "version",
			Short: "Print the nerflow version",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				_, err := fmt.Fprintln(cmd.OutOrStdout(), "nerflow", version.String())
				return err
			},
		}
	})
}
