// Package cli implements the nerflow command line. Each command lives in its
// own file and adds itself to the root command with register.
package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/nerflow/nerflow/internal/config"
	"github.com/nerflow/nerflow/pipeline/engine"
)

// app is what every command gets after the root's pre-run: the merged
// configuration and the logger built from it.
type app struct {
	v   *viper.Viper
	cfg *config.Config
	log *slog.Logger
}

var (
	commands []func(*app) *cobra.Command
	cfgFile  string
)

// register adds a command constructor; commands call it from init.
func register(f func(*app) *cobra.Command) { commands = append(commands, f) }

// NewRoot builds the root command with every registered subcommand.
func NewRoot() *cobra.Command {
	a := &app{}
	root := &cobra.Command{
		Use:   "nerflow",
		Short: "Train named-entity taggers from gazetteers, raw text and a few labels",
		Long: `nerflow runs weak- and semi-supervised NER methods (RoSTER, BOND, ...) as
pipelines of stages: distant labeling, augmentation, training, ensembling and
self-training. Configuration comes from nerflow.yaml, NERFLOW_* environment
variables and flags, in increasing precedence.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			v, err := config.New(cfgFile)
			if err != nil {
				return err
			}
			for flag, key := range map[string]string{"store": "store", "redis": "redis.addr", "log-level": "log.level", "log-format": "log.format"} {
				if err := v.BindPFlag(key, cmd.Flags().Lookup(flag)); err != nil {
					return fmt.Errorf("binding --%s: %w", flag, err)
				}
			}
			cfg, err := config.Load(v)
			if err != nil {
				return err
			}
			a.v, a.cfg, a.log = v, cfg, cfg.Logger(cmd.ErrOrStderr())
			slog.SetDefault(a.log)
			// A Redis away for minutes costs a few lines, not one per poll.
			engine.RouteRedisLogs(a.log, 30*time.Second)
			return nil
		},
	}
	pf := root.PersistentFlags()
	pf.StringVar(&cfgFile, "config", "", "config file (default: ./nerflow.yaml, ~/.config/nerflow/nerflow.yaml, /etc/nerflow/nerflow.yaml)")
	pf.String("store", config.Defaults["store"].(string), "artifact store URL (file://DIR or s3://BUCKET/PREFIX?endpoint=HOST:PORT)")
	pf.String("redis", "", "Redis address host:port (empty: in-process Redis, embedded mode only)")
	pf.String("log-level", "info", "log level: debug, info, warn, error")
	pf.String("log-format", "text", "log format: text or json")
	for _, f := range commands {
		root.AddCommand(f(a))
	}
	return root
}

// Execute runs the command line and returns the process exit code.
func Execute(ctx context.Context) int {
	if err := NewRoot().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "nerflow:", err)
		return 1
	}
	return 0
}
