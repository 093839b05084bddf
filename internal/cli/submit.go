package cli

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/nerflow/nerflow/pipeline/engine"
)

func init() {
	register(func(a *app) *cobra.Command {
		var (
			sets []string
			wait bool
		)
		cmd := &cobra.Command{
			Use:   "submit SPEC.yaml",
			Short: "Submit a pipeline spec to the cluster and print the run id",
			Long: `Submit validates a spec, imports its external datasets (local paths are read
by this process) into the store, creates the run in Redis and enqueues the
nodes that have no parents; workers do the rest. It prints the run id, for
nerflow status, cancel, retry and artifacts.`,
			Example: `  nerflow submit pipeline.yaml --set train.epochs=5
  nerflow status $(nerflow submit pipeline.yaml)`,
			Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				g, err := loadGraph(args[0], sets)
				if err != nil {
					return err
				}
				text, err := os.ReadFile(args[0])
				if err != nil {
					return err
				}
				ctx := cmd.Context()
				e, closeAll, err := a.clusterEngine(ctx, true)
				if err != nil {
					return err
				}
				defer closeAll()
				id, err := e.Submit(ctx, g, engine.SubmitOptions{Spec: text, SpecFile: args[0], Overrides: sets})
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), id)
				if !wait {
					return nil
				}
				st, err := e.Wait(ctx, id, 500*time.Millisecond, nil)
				if err != nil {
					return err
				}
				if st.State != engine.Succeeded {
					return fmt.Errorf("run %s %s: %s", id, st.State, st.Error)
				}
				return nil
			},
		}
		addSetFlag(cmd, &sets)
		cmd.Flags().BoolVar(&wait, "wait", false, "wait for the run to finish; fail if it does not succeed")
		return cmd
	})
}
