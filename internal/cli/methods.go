package cli

import (
	"fmt"
	"io"
	"strings"
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
						fmt.Fprintf(tw, "%s\t%s\t%s\n", m.Name, orDash(methodInputList(m.Inputs)), firstSentence(m.Doc))
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

func methodInputList(ins []spec.MethodInput) string {
	names := make([]string, len(ins))
	for i, in := range ins {
		names[i] = in.Name
		if in.Many {
			names[i] += "[]"
		}
		if in.Optional {
			names[i] += "?"
		}
	}
	return strings.Join(names, ", ")
}

func describeMethod(w io.Writer, m *spec.Method) {
	fmt.Fprintf(w, "method %s\n", m.Name)
	if m.Doc != "" {
		fmt.Fprintf(w, "\n%s\n", m.Doc)
	}
	writeParams(w, m.Params)
	if len(m.Inputs) > 0 {
		fmt.Fprintln(w, "\nInputs:")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  NAME\tKIND\tTAKES\tDESCRIPTION")
		for _, in := range m.Inputs {
			takes := "one reference"
			switch {
			case in.Many && in.Optional:
				takes = "optional, a list"
			case in.Many:
				takes = "a list"
			case in.Optional:
				takes = "optional"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", in.Name, orDash(in.Kind), takes, in.Doc)
		}
		tw.Flush()
	}
	fmt.Fprintf(w, "\nCall it from a spec:\n\n  method: %s\n  params: {...}\n  inputs: {...}\n  overrides: {NODE: {PARAM: VALUE}}\n", m.Name)
}
