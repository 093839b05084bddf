package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/nerflow/nerflow/stages"
)

func init() {
	register(func(a *app) *cobra.Command {
		cmd := &cobra.Command{
			Use:   "artifacts",
			Short: "List and fetch the artifacts a run produced",
		}
		var asJSON bool
		ls := &cobra.Command{
			Use:   "ls RUN",
			Short: "List every output of every node of a run, with its files and digests",
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				ctx := cmd.Context()
				_, st, closeAll, err := a.runStatus(ctx, args[0])
				if err != nil {
					return err
				}
				defer closeAll()
				out := cmd.OutOrStdout()
				if asJSON {
					m := map[string]map[string]stages.Artifact{}
					for _, n := range st.Nodes {
						if len(n.Outputs) > 0 {
							m[n.ID] = n.Outputs
						}
					}
					enc := json.NewEncoder(out)
					enc.SetIndent("", "  ")
					return enc.Encode(m)
				}
				tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "NODE\tOUTPUT\tKIND\tFILE\tSIZE\tDIGEST")
				for _, n := range st.Nodes {
					for _, name := range n.OutputNames() {
						art := n.Outputs[name]
						for _, f := range art.Files {
							fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", n.ID, name, orDash(art.Kind), f.Name, bytesString(f.Size),
								strings.TrimPrefix(f.Digest, "sha256:")[:16])
						}
					}
				}
				return tw.Flush()
			},
		}
		ls.Flags().BoolVar(&asJSON, "json", false, "print the artifact manifests as JSON")

		var outPath string
		get := &cobra.Command{
			Use:   "get RUN NODE OUTPUT",
			Short: "Fetch one output of a node: a single file to stdout (or -o FILE), several into -o DIR",
			Example: `  nerflow artifacts get 20261125-101500-a1b2c3 total total > total.json
  nerflow artifacts get 20261125-101500-a1b2c3 'train[seed=1]' model -o model/`,
			Args: cobra.ExactArgs(3),
			RunE: func(cmd *cobra.Command, args []string) error {
				ctx := cmd.Context()
				e, st, closeAll, err := a.runStatus(ctx, args[0])
				if err != nil {
					return err
				}
				defer closeAll()
				n, ok := st.Node(args[1])
				if !ok {
					ids := make([]string, len(st.Nodes))
					for i, n := range st.Nodes {
						ids[i] = n.ID
					}
					return fmt.Errorf("run %s has no node %q (nodes: %s)", args[0], args[1], strings.Join(ids, ", "))
				}
				art, ok := n.Outputs[args[2]]
				if !ok {
					if len(n.Outputs) == 0 {
						return fmt.Errorf("node %s is %s and has no outputs", n.ID, n.State)
					}
					return fmt.Errorf("node %s has no output %q (outputs: %s)", n.ID, args[2], strings.Join(n.OutputNames(), ", "))
				}
				in := stages.NewInput(ctx, e.Store(), art)
				if len(art.Files) == 1 && (outPath == "" || outPath == "-") {
					rc, err := in.Open(art.Files[0].Name)
					if err != nil {
						return err
					}
					defer rc.Close()
					_, err = io.Copy(cmd.OutOrStdout(), rc)
					return err
				}
				if outPath == "" || outPath == "-" {
					return fmt.Errorf("output %s of %s has %d files: give a directory with -o DIR", args[2], n.ID, len(art.Files))
				}
				if err := in.Fetch(outPath); err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "%d files written to %s\n", len(art.Files), outPath)
				return nil
			},
		}
		get.Flags().StringVarP(&outPath, "output", "o", "", "directory to write the files into (a single file goes to stdout without it)")
		cmd.AddCommand(ls, get)
		return cmd
	})
}
