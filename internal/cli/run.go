package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nerflow/nerflow/eval"
	"github.com/nerflow/nerflow/internal/config"
	"github.com/nerflow/nerflow/kit"
	"github.com/nerflow/nerflow/pipeline/engine"
	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/refine"
	"github.com/nerflow/nerflow/registry"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/storage"
)

func init() {
	register(func(a *app) *cobra.Command {
		var (
			sets        []string
			concurrency int
			device      string
			noProgress  bool
			export      string
			threads     int
		)
		cmd := &cobra.Command{
			Use:   "run SPEC.yaml",
			Short: "Run a pipeline spec in this process (embedded Redis, workers and file store)",
			Long: `Run executes every node of a pipeline spec in this process: an in-process
Redis, in-process workers for the cpu and gpu queues, and the configured
artifact store (by default the directory .nerflow/store). It is the same
engine a cluster runs. Nodes whose outputs are already in the store are
cached, so running a spec again, after a change or after Ctrl-C, executes
only what is new.

The spec syntax is described in docs/spec.md; ` + "`nerflow stages`" + ` lists the stages.`,
			Example: `  nerflow run pipeline.yaml
  nerflow run pipeline.yaml --set train.epochs=5 --set train.fan_out.seed=1,2,3
  nerflow run pipeline.yaml --export out/`,
			Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				if err := checkDevice(device); err != nil {
					return err
				}
				g, err := loadGraph(args[0], sets)
				if err != nil {
					return err
				}
				specText, err := os.ReadFile(args[0])
				if err != nil {
					return err
				}
				kit.SetThreads(threads)
				ctx := cmd.Context()
				st, err := storage.Open(ctx, a.cfg.Store)
				if err != nil {
					return err
				}
				defer st.Close()

				view := newRunView(os.Stderr, !noProgress)
				// Logs go through the view so that they scroll above the bars.
				lvl, _ := config.ParseLevel(a.cfg.Log.Level)
				log := slog.New(slog.NewTextHandler(view.Writer(), &slog.HandlerOptions{Level: lvl}))
				em, err := engine.StartEmbedded(st, engine.WorkerOptions{
					Concurrency: concurrency, Device: device, DelayedPollInterval: 200 * time.Millisecond,
					RetryDelay: func(n int) time.Duration { return min(time.Second<<n, 30*time.Second) },
				}, engine.WithLogger(log))
				if err != nil {
					return err
				}
				defer em.Close()
				started := time.Now()
				final, runErr := em.Run(ctx, g, engine.SubmitOptions{Spec: specText, SpecFile: args[0], Overrides: sets},
					200*time.Millisecond, view.update)
				view.close()
				if final == nil {
					return runErr
				}
				out := cmd.OutOrStdout()
				if err := printNodeTable(out, final, false); err != nil {
					return err
				}
				fmt.Fprintf(out, "\nrun %s %s in %s: %s\n", final.ID, final.State, shortDuration(time.Since(started)), countsLine(final))
				fmt.Fprintf(out, "artifacts in %s%s\n", storeLocation(st, a.cfg.Store), " (nerflow artifacts ls "+final.ID+"; nerflow artifacts get "+final.ID+" NODE OUTPUT)")
				if export != "" && final.State == engine.Succeeded {
					n, err := exportSinks(ctx, st, final, g.Nodes, export)
					if err != nil {
						return err
					}
					fmt.Fprintf(out, "exported %d outputs of the final nodes to %s\n", n, export)
				}
				if final.State == engine.Succeeded {
					// Register the models the run declared (registry.register stage).
					// The run itself succeeded: a registry problem is
					// reported, and the next models command tries again.
					created, err := registry.New(st, registry.WithLogger(log)).SyncRun(ctx, final.ID, 30*time.Second)
					if err != nil {
						log.Warn("registering the run's models", "err", err)
					}
					for _, v := range created {
						fmt.Fprintf(out, "registered model %s (nerflow models show %s)\n", v.Ref(), v.Ref())
					}
				}
				switch {
				case errors.Is(runErr, context.Canceled) || errors.Is(runErr, context.DeadlineExceeded):
					return errors.New("interrupted: finished nodes are cached; run the same command again to resume")
				case runErr != nil:
					return runErr
				case final.State != engine.Succeeded:
					return fmt.Errorf("run %s: %s", final.State, final.Error)
				}
				return nil
			},
		}
		addSetFlag(cmd, &sets)
		threadsFlag(cmd.Flags(), &threads)
		cmd.Flags().IntVar(&concurrency, "concurrency", runtime.NumCPU(), "nodes executed at once")
		cmd.Flags().StringVar(&device, "device", "cpu", "device given to stages: cpu or cuda:N")
		cmd.Flags().BoolVar(&noProgress, "no-progress", false, "print one line per node instead of progress bars")
		cmd.Flags().StringVar(&export, "export", "", "copy the outputs of the final nodes (those without children) into this directory as plain files")
		return cmd
	})
}

func countsLine(st *engine.RunStatus) string {
	c := st.Counts()
	var parts []string
	for _, s := range []string{engine.Done, engine.Cached, engine.Failed, engine.Cancelled, engine.Running, engine.Queued, engine.Pending} {
		if c[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c[s], s))
		}
	}
	return fmt.Sprintf("%d nodes (%s)", len(st.Nodes), strings.Join(parts, ", "))
}

// storeLocation says where a store keeps its objects, as a path when it is
// a local directory.
func storeLocation(st storage.Store, url string) string {
	if local, ok := st.(storage.LocalDir); ok {
		if wd, err := os.Getwd(); err == nil {
			if rel, err := filepath.Rel(wd, local.Root()); err == nil && !strings.HasPrefix(rel, "..") {
				return "./" + rel
			}
		}
		return local.Root()
	}
	return storage.Redact(url)
}

// exportSinks copies the outputs of the final nodes to dir/NODE/OUTPUT/FILE:
// those without children, or whose only children register models or choose
// one on the dev scores (the registry keeps the cards, and a selection reads
// the scores of every step: the user wants the models and reports); and of
// each decision its report (a selection's: every candidate's dev scores and
// which it kept; the labels' refinement's: what it rejected, and which
// labels the dev split kept), not the model or corpus it passes on.
func exportSinks(ctx context.Context, st storage.Store, run *engine.RunStatus, nodes []*spec.Node, dir string) (int, error) {
	n := 0
	for _, e := range exports(nodes) {
		ns, ok := run.Node(e.node)
		if !ok {
			continue
		}
		for name, a := range ns.Outputs {
			if e.output != "" && name != e.output {
				continue
			}
			dst := filepath.Join(dir, safeName(e.node), name)
			if err := stages.NewInput(ctx, st, a).Fetch(dst); err != nil {
				return n, fmt.Errorf("exporting %s.%s: %w", e.node, name, err)
			}
			n++
		}
	}
	return n, nil
}

// export is what exportSinks copies of a node: one output, or all ("").
type export struct{ node, output string }

// decisions are the stages whose report says what a run decided, on
// the way to its final model: which model a selection kept, which labels
// were refined and which kept. exportSinks copies their reports, not what
// they pass on.
var decisions = []string{eval.StageSelect, refine.StageVote, refine.StageChoose}

// exports lists what exportSinks copies: every output of the sinks, the
// report of each decision.
func exports(nodes []*spec.Node) []export {
	var out []export
	for _, node := range sinks(nodes) {
		out = append(out, export{node: node.ID})
	}
	for _, node := range nodes {
		if slices.Contains(decisions, node.Stage) {
			out = append(out, export{node: node.ID, output: "report"})
		}
	}
	return out
}

// sinks returns the final nodes of a graph, as exportSinks means them.
func sinks(nodes []*spec.Node) []*spec.Node {
	stage := map[string]string{}
	for _, node := range nodes {
		stage[node.ID] = node.Stage
	}
	final := func(node *spec.Node) bool {
		if node.Stage == registry.StageName {
			return false
		}
		for _, c := range node.Children {
			if stage[c] != registry.StageName && stage[c] != eval.StageSelect {
				return false
			}
		}
		return true
	}
	var out []*spec.Node
	for _, node := range nodes {
		if final(node) {
			out = append(out, node)
		}
	}
	return out
}

// safeName turns a node id such as train[seed=3] into a portable file name.
func safeName(id string) string {
	r := strings.NewReplacer("[", "_", "]", "", "=", "-", ",", "_", "/", "_", " ", "_")
	return r.Replace(id)
}
