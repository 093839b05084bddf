package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nerflow/nerflow/pipeline/engine"
)

func init() {
	register(func(a *app) *cobra.Command {
		var asJSON, drop bool
		cmd := &cobra.Command{
			Use:   "verify [RUN]",
			Short: "Check every artifact of a run, or of the store, against its digests",
			Long: `Verify reads every file of every artifact of RUN (its datasets and its
nodes' outputs) and checks its size and SHA-256 digest against the
artifact's manifest. Without RUN it checks the whole store: the outputs of
every node record (the cache) and every imported dataset. It lists what is
damaged (a file gone, replaced or rotted) and exits with status 1 if
anything is.

A run that reads a damaged output makes it again by itself; --drop deletes
the cache entries (node records) of damaged outputs now, so that the next
run executes their nodes without first failing a read.`,
			Args: cobra.MaximumNArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				ctx := cmd.Context()
				e, closeAll, err := a.clusterEngine(ctx, false)
				if err != nil {
					return err
				}
				defer closeAll()
				run := ""
				if len(args) == 1 {
					run = args[0]
				}
				r, err := e.Verify(ctx, run, drop)
				if err != nil {
					return err
				}
				out := cmd.OutOrStdout()
				if asJSON {
					if err := writeJSON(out, r); err != nil {
						return err
					}
				} else {
					printVerifyReport(cmd, r, drop)
				}
				if len(r.Damaged) > 0 {
					return fmt.Errorf("%d damaged", len(r.Damaged))
				}
				return nil
			},
		}
		cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
		cmd.Flags().BoolVar(&drop, "drop", false, "delete the node records of damaged outputs, so that they are made again")
		return cmd
	})
}

func printVerifyReport(cmd *cobra.Command, r *engine.VerifyReport, drop bool) {
	out := cmd.OutOrStdout()
	for _, d := range r.Damaged {
		what := d.Output
		if d.Node != "" {
			what = "node " + d.Node + ", output " + d.Output
		}
		if d.Key != "" {
			what += " (key " + engine.Short(d.Key) + ")"
		}
		fmt.Fprintf(out, "DAMAGED %s\n  at %s %s\n  %s\n", what, d.Prefix, d.Digest, strings.Join(d.Problems, "\n  "))
	}
	fmt.Fprintf(out, "checked %d artifacts, %d files, %s: %d damaged\n", r.Artifacts, r.Files, byteCount(r.Bytes), len(r.Damaged))
	if drop {
		fmt.Fprintf(out, "dropped %d node records; the next run that needs them executes their nodes again\n", r.Dropped)
	}
}

// byteCount formats n bytes for people: 512 B, 3.1 MB.
func byteCount(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB", float64(n)/float64(div), "kMGTPE"[exp])
}
