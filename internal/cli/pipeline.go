package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/nerflow/nerflow/internal/nodelog"
	"github.com/nerflow/nerflow/pipeline/engine"
	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/storage"
	_ "github.com/nerflow/nerflow/storage/all" // every store URL scheme
)

// Helpers shared by the pipeline commands (run, worker, submit, runs,
// status, cancel, retry, artifacts).

// clusterEngine connects to the configured Redis and store. With no Redis
// configured, read-only commands (live=false) still work on the run
// manifests in the store, which is where embedded runs leave their state;
// commands that change a live run (live=true) need the Redis server.
// runStatus connects to the cluster and reads one run's status; the caller
// calls the returned close function when done with the engine.
func (a *app) runStatus(ctx context.Context, runID string) (*engine.Engine, *engine.RunStatus, func(), error) {
	e, closeAll, err := a.clusterEngine(ctx, false)
	if err != nil {
		return nil, nil, nil, err
	}
	st, err := e.Status(ctx, runID)
	if err != nil {
		closeAll()
		return nil, nil, nil, err
	}
	return e, st, closeAll, nil
}

func (a *app) clusterEngine(ctx context.Context, live bool) (*engine.Engine, func(), error) {
	c, err := a.connect(ctx, live)
	if err != nil {
		return nil, nil, err
	}
	return c.engine, c.close, nil
}

// conn is a connection to the cluster: its Redis, store and engine.
type conn struct {
	engine *engine.Engine
	rdb    redis.UniversalClient
	store  storage.Store
	close  func()
}

// connect opens the configured store and Redis (see clusterEngine for
// live). Without a Redis server it starts a private in-process one (which
// nerflow serve also runs its embedded cluster on). The engine's logger
// also keeps each node's log lines in Redis (package nodelog), for the API
// and dashboard.
func (a *app) connect(ctx context.Context, live bool) (*conn, error) {
	st, err := storage.Open(ctx, a.cfg.Store)
	if err != nil {
		if live || !storage.IsTransient(err) {
			return nil, err
		}
		// Read-only commands show what Redis knows and say that the
		// store is away, rather than failing.
		a.log.Warn("cannot reach the store; showing what Redis knows", "err", err)
		st = storage.Unavailable(fmt.Errorf("store unreachable: %w", err))
	}
	var rdb *redis.Client
	var mr *miniredis.Miniredis
	if a.cfg.Redis.Addr == "" {
		if live {
			st.Close()
			return nil, errors.New("no Redis server configured (--redis HOST:PORT or NERFLOW_REDIS_ADDR): " +
				"this command works on cluster runs; an embedded run (nerflow run) lives only as long as its process")
		}
		// An empty in-process Redis: every run is looked up in the store.
		if mr, rdb, err = engine.StartPrivateRedis(); err != nil {
			st.Close()
			return nil, err
		}
	} else {
		rdb = redis.NewClient(&redis.Options{Addr: a.cfg.Redis.Addr, Password: a.cfg.Redis.Password, DB: a.cfg.Redis.DB})
		if err := rdb.Ping(ctx).Err(); err != nil {
			if live || !storage.IsTransient(err) {
				st.Close()
				rdb.Close()
				return nil, fmt.Errorf("redis %s: %w", a.cfg.Redis.Addr, err)
			}
			a.log.Warn("cannot reach Redis; showing the run manifests in the store", "redis", a.cfg.Redis.Addr, "err", err)
		}
	}
	logs := nodelog.NewHandler(a.log.Handler(), rdb, a.cfg.Redis.Namespace)
	opts := []engine.Option{engine.WithNamespace(a.cfg.Redis.Namespace), engine.WithLogger(slog.New(logs))}
	if mr != nil {
		opts = append(opts, engine.WithPrivateRedis())
	}
	e := engine.New(rdb, st, opts...)
	closeAll := func() {
		e.Close()
		logs.Close()
		rdb.Close()
		if mr != nil {
			mr.Close()
		}
		st.Close()
	}
	return &conn{engine: e, rdb: rdb, store: st, close: closeAll}, nil
}

// loadGraph reads, validates and expands a spec file with --set overrides.
func loadGraph(path string, sets []string) (*spec.Graph, error) {
	s, err := spec.Load(path, sets...)
	if err != nil {
		return nil, err
	}
	return s.Expand()
}

func addSetFlag(cmd *cobra.Command, sets *[]string) {
	cmd.Flags().StringArrayVar(sets, "set", nil, "override a parameter: NODE.PARAM=VALUE, NODE.queue=gpu, NODE.fan_out.PARAM=V1,V2, or PARAM=VALUE for a parameter of the spec's method (repeatable)")
}

var deviceRE = regexp.MustCompile(`^(cpu|cuda:[0-9]+)$`)

func checkDevice(d string) error {
	if !deviceRE.MatchString(d) {
		return fmt.Errorf("--device %q: want cpu or cuda:N", d)
	}
	return nil
}
