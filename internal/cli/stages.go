package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/nerflow/nerflow/stages"
)

func init() {
	register(func(a *app) *cobra.Command {
		cmd := &cobra.Command{
			Use:   "stages [NAME]",
			Short: "List the registered stages, or describe one: parameters, defaults, inputs and outputs",
			Args:  cobra.MaximumNArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				out := cmd.OutOrStdout()
				if len(args) == 0 {
					all := stages.All()
					if len(all) == 0 {
						_, err := fmt.Fprintln(out, "no stages are registered in this binary")
						return err
					}
					tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
					fmt.Fprintln(tw, "STAGE\tVERSION\tQUEUE\tINPUTS\tOUTPUTS\tDESCRIPTION")
					for _, s := range all {
						fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", s.Name, s.Version, s.DefaultQueue(),
							orDash(portList(s.Inputs)), orDash(portList(s.Outputs)), firstSentence(s.Doc))
					}
					return tw.Flush()
				}
				s, ok := stages.Lookup(args[0])
				if !ok {
					return fmt.Errorf("no stage %q (nerflow stages lists them)", args[0])
				}
				return describeStage(out, s)
			},
		}
		return cmd
	})
}

func portList(ps []stages.Port) string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name
		if p.Many {
			names[i] += "[]"
		}
		if p.Optional {
			names[i] += "?"
		}
	}
	return strings.Join(names, ", ")
}

func firstSentence(s string) string {
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i+1]
	}
	return s
}

func describeStage(w io.Writer, s *stages.Stage) error {
	fmt.Fprintf(w, "%s (version %d, queue %s", s.Name, s.Version, s.DefaultQueue())
	if s.Timeout > 0 {
		fmt.Fprintf(w, ", timeout %s", s.Timeout)
	}
	fmt.Fprintf(w, ", %d retries", s.MaxRetries())
	if s.Resumable {
		fmt.Fprint(w, ", resumable")
	}
	fmt.Fprintln(w, ")")
	if s.Doc != "" {
		fmt.Fprintf(w, "\n%s\n", s.Doc)
	}
	writeParams(w, s.Params)
	writePorts(w, "Inputs", s.Inputs)
	writePorts(w, "Outputs", s.Outputs)
	return nil
}

// writePorts writes the table of a stage's inputs or outputs, or of a
// method's inputs.
func writePorts(w io.Writer, title string, ports []stages.Port) {
	if len(ports) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "\n%s:\n", title)
	if title == "Outputs" {
		fmt.Fprintln(tw, "  NAME\tKIND\tDESCRIPTION")
	} else {
		fmt.Fprintln(tw, "  NAME\tKIND\tTAKES\tDESCRIPTION")
	}
	for _, p := range ports {
		if title == "Outputs" {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", p.Name, orDash(p.Kind), p.Doc)
			continue
		}
		takes := "one artifact"
		switch {
		case p.Many && p.Optional:
			takes = "any number (fan-in)"
		case p.Many:
			takes = "one or more (fan-in)"
		case p.Optional:
			takes = "optional"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", p.Name, orDash(p.Kind), takes, p.Doc)
	}
	tw.Flush()
}

// writeParams writes the table of a stage's or a method's parameters.
func writeParams(w io.Writer, params []stages.Param) {
	if len(params) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "\nParameters:")
	fmt.Fprintln(tw, "  NAME\tTYPE\tDEFAULT\tALLOWED\tDESCRIPTION")
	for _, p := range params {
		def := "(required)"
		if !p.Required {
			def = formatDefault(p.Default)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", p.Name, p.Type, def, orDash(allowed(p)), p.Doc)
	}
	tw.Flush()
}

func formatDefault(v any) string {
	switch x := v.(type) {
	case string:
		return fmt.Sprintf("%q", x)
	case time.Duration:
		return x.String()
	case []int64, []float64, []string:
		b, _ := json.Marshal(x)
		return string(b)
	}
	return fmt.Sprint(v)
}

func allowed(p stages.Param) string {
	var parts []string
	if p.Min != nil && p.Max != nil {
		parts = append(parts, fmt.Sprintf("%v..%v", *p.Min, *p.Max))
	} else if p.Min != nil {
		parts = append(parts, fmt.Sprintf(">= %v", *p.Min))
	} else if p.Max != nil {
		parts = append(parts, fmt.Sprintf("<= %v", *p.Max))
	}
	if len(p.Enum) > 0 {
		parts = append(parts, strings.Join(p.Enum, "|"))
	}
	return strings.Join(parts, " ")
}
