package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nerflow/nerflow/pipeline/spec"
)

func init() {
	register(func(a *app) *cobra.Command {
		var (
			sets []string
			tree bool
		)
		cmd := &cobra.Command{
			Use:   "expand SPEC.yaml",
			Short: "Print the nodes a spec makes (a method call expanded) as a spec, or as a tree",
			Long: `Expand validates a spec like run does and prints its nodes as a spec
that lists them by hand: for a method call, the nodes the method makes with
the overrides and --set applied. Saved next to the original (relative paths
are the original's) and run, it gives the same graph, so it is the starting
point for changing a method's graph by hand. --tree draws the graph instead,
fan-out expanded: each node under its last parent, with its stage, queue
and inputs.`,
			Example: `  nerflow expand examples/conll03-distant.yaml > examples/my-ablation.yaml
  nerflow expand examples/conll03-distant.yaml --set seeds=1,2,3 --tree`,
			Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				s, err := spec.Load(args[0], sets...)
				if err != nil {
					return err
				}
				g, err := s.Expand()
				if err != nil {
					return err
				}
				out := cmd.OutOrStdout()
				if tree {
					_, err = fmt.Fprint(out, g.Tree())
					return err
				}
				y, err := s.YAML()
				if err != nil {
					return err
				}
				if s.Method != "" {
					fmt.Fprintf(out, "# The nodes method %s makes for %s; relative paths are relative to its directory.\n", s.Method, args[0])
				}
				_, err = out.Write(y)
				return err
			},
		}
		addSetFlag(cmd, &sets)
		cmd.Flags().BoolVar(&tree, "tree", false, "draw the expanded graph as an indented tree")
		return cmd
	})
}
