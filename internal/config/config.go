// Package config loads nerflow's process configuration: the file
// nerflow.yaml, environment variables prefixed NERFLOW_ (NERFLOW_REDIS_ADDR for
// redis.addr) and command-line flags, in increasing order of precedence.
//
// This is the configuration of the process (where the store and Redis are,
// how to log). Hyperparameters of methods live in pipeline specs, not here.
package config

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/viper"
)

// Config is the validated process configuration.
type Config struct {
	// Store is the artifact store URL (see package storage).
	Store string `mapstructure:"store"`
	Redis Redis  `mapstructure:"redis"`
	Log   Log    `mapstructure:"log"`
	Serve Serve  `mapstructure:"serve"`
}

// Serve configures `nerflow serve`.
type Serve struct {
	// Addr is the HTTP listen address.
	Addr string `mapstructure:"addr"`
	// Token is the bearer token every endpoint but /healthz requires
	// (NERFLOW_SERVE_TOKEN). It is a secret: never logged.
	Token string `mapstructure:"token"`
	// MaxQueue is how many prediction requests may wait for the model;
	// beyond it they are refused with 503 and Retry-After.
	MaxQueue int `mapstructure:"max_queue"`
}

// Redis says how to reach the task queue.
type Redis struct {
	// Addr is host:port of a Redis server. Empty means an in-process Redis
	// (embedded mode), valid only for commands that run everything in one
	// process.
	Addr     string `mapstructure:"addr"`
	Password string `mapstructure:"password"`
	DB       int    `mapstructure:"db"`
	// Namespace prefixes nerflow's Redis keys and asynq queue names
	// ("nerflow:cpu", "nerflow:gpu"), so that several deployments (or test
	// runs) can share one Redis server.
	Namespace string `mapstructure:"namespace"`
}

// Log configures log/slog output.
type Log struct {
	Level  string `mapstructure:"level"`  // debug, info, warn, error
	Format string `mapstructure:"format"` // text or json
}

// Defaults are the embedded single-machine defaults.
var Defaults = map[string]any{
	"store":           "file://.nerflow/store",
	"redis.addr":      "",
	"redis.password":  "",
	"redis.db":        0,
	"redis.namespace": "nerflow",
	"log.level":       "info",
	"log.format":      "text",
	"serve.addr":      "127.0.0.1:8080",
	"serve.token":     "",
	"serve.max_queue": 1024,
}

// New returns a viper instance with nerflow's defaults, environment binding
// and config-file search path. file, when non-empty, is the only config file
// read; otherwise nerflow.yaml is looked up in the working directory,
// $HOME/.config/nerflow and /etc/nerflow, and its absence is not an error.
func New(file string) (*viper.Viper, error) {
	v := viper.New()
	for k, val := range Defaults {
		v.SetDefault(k, val)
	}
	v.SetEnvPrefix("NERFLOW")
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_", "-", "_"))
	v.AutomaticEnv()
	if file == "" {
		// Look for the file by its full name: viper's own search also
		// accepts a file named just "nerflow", which is the binary itself
		// when it is run from its own directory.
		file = findConfig()
		if file == "" {
			return v, nil
		}
	}
	v.SetConfigFile(file)
	if err := v.ReadInConfig(); err != nil {
		return nil, fmt.Errorf("config: reading %s: %w", file, err)
	}
	return v, nil
}

// searchPath lists where nerflow.yaml is looked for, first match wins.
func searchPath() []string {
	dirs := []string{"."}
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, ".config", "nerflow"))
	}
	return append(dirs, "/etc/nerflow")
}

func findConfig() string {
	for _, dir := range searchPath() {
		for _, name := range []string{"nerflow.yaml", "nerflow.yml"} {
			p := filepath.Join(dir, name)
			if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
				return p
			}
		}
	}
	return ""
}

// Load unmarshals and validates the configuration held by v.
func Load(v *viper.Viper) (*Config, error) {
	var c Config
	if err := v.UnmarshalExact(&c); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Validate reports the first invalid setting.
func (c *Config) Validate() error {
	if c.Store == "" {
		return errors.New("config: store: must be a storage URL such as file://.nerflow/store or s3://bucket")
	}
	if _, err := ParseLevel(c.Log.Level); err != nil {
		return err
	}
	if c.Serve.MaxQueue < 1 {
		return fmt.Errorf("config: serve.max_queue: %d: at least 1 request must be able to wait for the model", c.Serve.MaxQueue)
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		return fmt.Errorf("config: log.format: %q is not text or json", c.Log.Format)
	}
	return nil
}

// ParseLevel turns a level name into a slog.Level.
func ParseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("config: log.level: %q is not debug, info, warn or error", s)
	}
	return l, nil
}

// Logger builds the process logger, writing to w (the command's stderr).
func (c *Config) Logger(w io.Writer) *slog.Logger {
	lvl, _ := ParseLevel(c.Log.Level)
	opts := &slog.HandlerOptions{Level: lvl}
	if c.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
