package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/nerflow/nerflow/pipeline/engine"
	"github.com/nerflow/nerflow/registry"
	"github.com/nerflow/nerflow/storage"
	"github.com/nerflow/nerflow/storage/artifact"
)

// withRegistry runs fn with the configured store's model registry, locking
// through the configured Redis when there is one, after registering the
// models of the runs finished since the last look.
func (a *app) withRegistry(cmd *cobra.Command, fn func(ctx context.Context, reg *registry.Registry) error) error {
	ctx := cmd.Context()
	st, err := storage.Open(ctx, a.cfg.Store)
	if err != nil {
		return err
	}
	defer st.Close()
	// Registering what finished since the last look is a side effect of
	// reading: its notes are debug lines, not part of a listing's output.
	opts := []registry.Option{registry.WithLogger(slog.New(quieter{a.log.Handler()}))}
	if a.cfg.Redis.Addr != "" {
		rdb, err := a.redisClient(ctx)
		if err != nil {
			return err
		}
		defer rdb.Close()
		opts = append(opts, registry.WithRedis(rdb, a.cfg.Redis.Namespace))
	}
	reg := registry.New(st, opts...)
	if _, err := reg.Sync(ctx); err != nil {
		return fmt.Errorf("registering the models of finished runs: %w", err)
	}
	return fn(ctx, reg)
}

// quieter passes info records on as debug ones; warnings and errors keep
// their level.
type quieter struct{ h slog.Handler }

func (q quieter) demote(l slog.Level) slog.Level {
	if l == slog.LevelInfo {
		return slog.LevelDebug
	}
	return l
}

func (q quieter) Enabled(ctx context.Context, l slog.Level) bool {
	return q.h.Enabled(ctx, q.demote(l))
}

func (q quieter) Handle(ctx context.Context, r slog.Record) error {
	r.Level = q.demote(r.Level)
	return q.h.Handle(ctx, r)
}

func (q quieter) WithAttrs(as []slog.Attr) slog.Handler { return quieter{q.h.WithAttrs(as)} }
func (q quieter) WithGroup(name string) slog.Handler    { return quieter{q.h.WithGroup(name)} }

func init() {
	register(func(a *app) *cobra.Command {
		cmd := &cobra.Command{
			Use:   "models",
			Short: "The model registry: list, show and promote the models runs produced",
			Long: `Every model a run declares with the registry.register stage (usually the last node of
a spec) is registered as NAME@N when the run succeeds, with its lineage (spec,
training stage and parameters, digests of the datasets upstream, nerflow
version) and its evaluation metrics. Tags such as production and staging
point at one version of a model; serving uses the production tag.`,
		}
		cmd.AddCommand(modelsList(a), modelsShow(a), modelsPromote(a))
		return cmd
	})
}

func modelsList(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list [NAME]",
		Short: "List models, or the versions of one model",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withRegistry(cmd, func(ctx context.Context, reg *registry.Registry) error {
				out := cmd.OutOrStdout()
				if len(args) == 0 {
					ms, err := reg.Models(ctx)
					if err != nil {
						return err
					}
					if asJSON {
						return writeJSON(out, ms)
					}
					tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
					fmt.Fprintln(tw, "MODEL\tVERSIONS\tLATEST\tTAGS\tF1\tREGISTERED")
					for _, m := range ms {
						fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\n", m.Name, m.Versions, m.Latest.Version, tagList(m.Tags),
							f1(m.Latest), m.Latest.Registered.Format("2006-01-02 15:04"))
					}
					return tw.Flush()
				}
				vs, err := reg.Versions(ctx, args[0])
				if err != nil {
					return err
				}
				tags, err := reg.Tags(ctx, args[0])
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(out, vs)
				}
				tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "VERSION\tTAGS\tF1\tSTAGE\tRUN\tREGISTERED")
				for i := len(vs) - 1; i >= 0; i-- {
					v := &vs[i]
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", v.Ref(), orDash(strings.Join(registry.TagsOf(tags, v.Version), ",")),
						f1(v), orDash(v.Stage), v.Run, v.Registered.Format("2006-01-02 15:04"))
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func modelsShow(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show NAME[@VERSION|@TAG]",
		Short: "Show a model version: lineage, metrics, tags",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withRegistry(cmd, func(ctx context.Context, reg *registry.Registry) error {
				v, err := reg.Resolve(ctx, args[0])
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(cmd.OutOrStdout(), v)
				}
				tags, err := reg.Tags(ctx, v.Name)
				if err != nil {
					return err
				}
				printVersion(cmd.OutOrStdout(), v, registry.TagsOf(tags, v.Version))
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func modelsPromote(a *app) *cobra.Command {
	var tag string
	cmd := &cobra.Command{
		Use:     "promote NAME@VERSION --tag production|staging",
		Short:   "Point a tag at a model version",
		Example: "  nerflow models promote conll03-distant@3 --tag production",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, n, t, err := registry.ParseRef(args[0])
			if err != nil {
				return err
			}
			if n == 0 || t != "" {
				return fmt.Errorf("promote %q: want NAME@VERSION with a version number", args[0])
			}
			return a.withRegistry(cmd, func(ctx context.Context, reg *registry.Registry) error {
				if err := reg.Promote(ctx, name, n, tag); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s@%d is now %s\n", name, n, tag)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&tag, "tag", "", "tag to move, e.g. production or staging (required)")
	_ = cmd.MarkFlagRequired("tag")
	return cmd
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeJSONFile writes v to path as writeJSON does; what names the file in
// the error.
func writeJSONFile(path, what string, v any) error {
	f, err := os.Create(path)
	if err == nil {
		err = writeJSON(f, v)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", what, err)
	}
	return nil
}

func tagList(tags map[string]int) string {
	var parts []string
	for t, v := range tags {
		parts = append(parts, fmt.Sprintf("%s=%d", t, v))
	}
	sort.Strings(parts)
	return orDash(strings.Join(parts, ","))
}

// f1 is the micro F1 of the version's first evaluation.
func f1(v *registry.Version) string {
	if len(v.Metrics) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", 100*v.Metrics[0].Micro.F1)
}

// modelSize says how much of a model is its own and how much it shares
// with other artifacts (the word vectors it was trained with).
func modelSize(a artifact.Manifest) string {
	var own, shared int64
	for _, f := range a.Files {
		if f.Shared() {
			shared += f.Size
		} else {
			own += f.Size
		}
	}
	if shared == 0 {
		return bytesString(own)
	}
	return bytesString(own) + " own + " + bytesString(shared) + " shared"
}

func printVersion(w io.Writer, v *registry.Version, tags []string) {
	fmt.Fprintf(w, "model      %s\n", v.Ref())
	fmt.Fprintf(w, "tags       %s\n", orDash(strings.Join(tags, ", ")))
	fmt.Fprintf(w, "registered %s by nerflow %s\n", v.Registered.Format("2006-01-02 15:04:05 MST"), v.Nerflow)
	fmt.Fprintf(w, "artifact   %s (%s, %d files, %s)\n", shortDigest(v.Model.Digest), v.Model.Prefix, len(v.Model.Files), modelSize(v.Model))
	for _, f := range v.Model.Files {
		if f.Shared() {
			fmt.Fprintf(w, "shared     %-12s %s (%s, stored once at %s)\n", f.Name, shortDigest(f.Digest), bytesString(f.Size), f.Blob)
		}
	}
	fmt.Fprintf(w, "run        %s (spec %s%s)\n", v.Run, orDash(v.SpecFile), overridesNote(v.Overrides))
	if v.Stage != "" {
		fmt.Fprintf(w, "trained by %s (%s v%d, node key %s)\n", v.Node, v.Stage, v.StageVersion, engine.Short(v.Key))
		var params bytes.Buffer
		if json.Compact(&params, v.Params) != nil {
			params.Write(v.Params)
		}
		fmt.Fprintf(w, "params     %s\n", params.String())
	}
	for _, in := range v.Inputs {
		fmt.Fprintf(w, "input      %-12s %s\n", in.Name, shortDigest(in.Digest))
	}
	for _, d := range v.Datasets {
		fmt.Fprintf(w, "dataset    %s %s (%s)\n", shortDigest(d.Digest), d.Source, strings.Join(d.Ports, ", "))
	}
	for _, m := range v.Metrics {
		fmt.Fprintf(w, "metrics    %s: P %.2f R %.2f F1 %.2f over %d sentences\n", orDash(m.Node),
			100*m.Micro.Precision, 100*m.Micro.Recall, 100*m.Micro.F1, m.Sentences)
		for _, t := range m.TypeNames() {
			s := m.Types[t]
			fmt.Fprintf(w, "             %-6s P %.2f R %.2f F1 %.2f\n", t, 100*s.Precision, 100*s.Recall, 100*s.F1)
		}
	}
}

func overridesNote(o []string) string {
	if len(o) == 0 {
		return ""
	}
	return ", --set " + strings.Join(o, " --set ")
}

// shortDigest abbreviates "sha256:<hex>" to 12 hex digits.
func shortDigest(d string) string { return engine.Short(strings.TrimPrefix(d, "sha256:")) }
