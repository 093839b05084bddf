package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
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

		var (
			outPath string
			force   bool
		)
		get := &cobra.Command{
			Use:   "get RUN NODE OUTPUT",
			Short: "Fetch one output of a node: a single file to stdout (or -o FILE), several into -o DIR",
			Long: `Get fetches one output of a node. A single file goes to stdout, or with -o to
that file name (to an existing directory, or a path ending in /, under its
own name); several files go into the directory -o names. Existing files are
never overwritten without --force, and each file appears whole or not at all.`,
			Example: `  nerflow artifacts get 20261125-101500-a1b2c3 total total > total.json
  nerflow artifacts get 20261125-101500-a1b2c3 total total -o total.json
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
				dsts, err := fetchTargets(art, outPath, force)
				if err != nil {
					return err
				}
				for i, f := range art.Files {
					if err := in.FetchFile(f.Name, dsts[i]); err != nil {
						return err
					}
				}
				if len(dsts) == 1 {
					fmt.Fprintf(cmd.ErrOrStderr(), "written to %s\n", dsts[0])
				} else {
					fmt.Fprintf(cmd.ErrOrStderr(), "%d files written to %s\n", len(dsts), outPath)
				}
				return nil
			},
		}
		get.Flags().StringVarP(&outPath, "output", "o", "", "where to write: for a single file, a file name (or an existing directory, or DIR/, to keep its name); for several files, a directory (default: a single file goes to stdout)")
		get.Flags().BoolVar(&force, "force", false, "overwrite files that already exist")
		cmd.AddCommand(ls, get)
		return cmd
	})
}

// fetchTargets says where each file of art goes for -o path. A single
// file goes to path itself, unless path is an existing directory or ends
// with a slash; several files go into the directory path. Existing files
// are refused without force, before anything is written.
func fetchTargets(art stages.Artifact, path string, force bool) ([]string, error) {
	info, statErr := os.Stat(path)
	isDir := statErr == nil && info.IsDir()
	slash := strings.HasSuffix(path, "/") || strings.HasSuffix(path, string(filepath.Separator))
	var dsts []string
	switch {
	case len(art.Files) == 1 && !isDir && !slash:
		dsts = []string{path}
	case statErr == nil && !isDir:
		return nil, fmt.Errorf("-o %s: is a file, but the output has %d files: give a directory", path, len(art.Files))
	default:
		for _, f := range art.Files {
			dsts = append(dsts, filepath.Join(path, filepath.FromSlash(f.Name)))
		}
	}
	if !force {
		var existing []string
		for _, d := range dsts {
			if _, err := os.Lstat(d); err == nil {
				existing = append(existing, d)
			}
		}
		if len(existing) > 0 {
			return nil, fmt.Errorf("-o %s: %s already exist(s); use --force to overwrite", path, strings.Join(existing, ", "))
		}
	}
	return dsts, nil
}
