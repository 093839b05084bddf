package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nerflow/nerflow/internal/allocator"
	"github.com/nerflow/nerflow/internal/version"
)

func init() {
	register(func(*app) *cobra.Command {
		return &cobra.Command{
			Use:   "version",
			Short: "Print the nerflow version and the C allocator serving libtorch",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				a := allocator.Current()
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "nerflow %s\nallocator %s (malloc from %s)\n", version.String(), a, a.Library)
				return err
			},
		}
	})
}
