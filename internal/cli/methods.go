package cli

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/nerflow/nerflow/pipeline/spec"
)

func init() {
	register(func(a *app) *cobra.Command {
		return &cobra.Command{
			Use:   "methods [NAME]",
			Short: "List the registered methods, or describe one: parameters, defaults, ranges and inputs",
			Long: `A method is a named template of a pipeline: a spec calls it with
"method: NAME", its parameters under "params:" and its inputs under
"inputs:" (docs/spec.md). ` + "`nerflow expand SPEC`" + ` shows the nodes a call makes.`,
			Args: cobra.MaximumNArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				out := cmd.OutOrStdout()
				if len(args) == 0 {
					all := spec.Methods()
					if len(all) == 0 {
						_, err := fmt.Fprintln(out, "no methods are registered in this binary")
						return err
					}
					tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
					fmt.Fprintln(tw, "METHOD\tINPUTS\tDESCRIPTION")
					for _, m := range all {
						fmt.Fprintf(tw, "%s\t%s\t%s\n", m.Name, orDash(portList(m.Inputs)), firstSentence(m.Doc))
					}
					return tw.Flush()
				}
				m, ok := spec.LookupMethod(args[0])
				if !ok {
					return fmt.Errorf("no method %q (nerflow methods lists them)", args[0])
				}
				describeMethod(out, m)
				return nil
			},
		}
	})
}

func describeMethod(w io.Writer, m *spec.Method) {
	fmt.Fprintf(w, "method %s\n", m.Name)
	if m.Doc != "" {
		fmt.Fprintf(w, "\n%s\n", m.Doc)
	}
	writeParams(w, m.Params)
	writePorts(w, "Inputs", m.Inputs)
	fmt.Fprintf(w, "\nCall it from a spec (docs/spec.md):\n\n  method: %s\n  params: {PARAM: VALUE}\n  inputs: {INPUT: PATH}\n  overrides: {NODE: {PARAM: VALUE}}\n", m.Name)
}
