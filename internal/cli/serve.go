package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nerflow/nerflow/internal/metrics"
	"github.com/nerflow/nerflow/internal/nodelog"
	"github.com/nerflow/nerflow/pipeline/engine"
	"github.com/nerflow/nerflow/predict"
	"github.com/nerflow/nerflow/registry"
	"github.com/nerflow/nerflow/schedule"
	"github.com/nerflow/nerflow/server"
	"github.com/nerflow/nerflow/server/backend"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/train/tagger"
	"github.com/nerflow/nerflow/workers"
)

// serveOptions are the flags of nerflow serve.
type serveOptions struct {
	model          string
	tag            string
	modelRun       string
	modelDir       string
	device         string
	workers        int
	maxBatch       int
	maxWait        time.Duration
	maxQueue       int
	reloadInterval time.Duration
	addr           string
	scheduler      bool
}

func init() {
	register(func(a *app) *cobra.Command {
		var o serveOptions
		cmd := &cobra.Command{
			Use:   "serve",
			Short: "Serve the HTTP API, the dashboard and POST /v1/predict",
			Long: `Serve answers the JSON API over runs (submit, list, status, cancel, retry,
nodes with their progress and logs, artifact downloads), workers, schedules
and models, serves the dashboard (embedded in the binary: it works offline)
and, with a model, POST /v1/predict.

Every endpoint but GET /healthz needs the bearer token serve.token
(NERFLOW_SERVE_TOKEN; at least 16 characters); the dashboard asks for it
once and keeps a session cookie derived from it.

Without a Redis server (embedded mode) the API runs its own in-process
Redis, workers and scheduler: runs submitted over HTTP execute in this
process and live as long as it. With --redis it is the API of the cluster;
--workers N also executes nodes here and --scheduler fires schedules.`,
			Example: `  NERFLOW_SERVE_TOKEN=$(openssl rand -hex 16) nerflow serve --addr :8080
  nerflow serve --redis redis:6379 --store s3://nerflow?endpoint=minio:9000 --model-run 20261126-071500-a1b2c3/train
  curl -H "Authorization: Bearer $TOKEN" -d '{"text":"John Smith lives in Paris."}' localhost:8080/v1/predict`,
			Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				if !cmd.Flags().Changed("addr") {
					o.addr = a.cfg.Serve.Addr
				}
				if !cmd.Flags().Changed("max-queue") {
					o.maxQueue = a.cfg.Serve.MaxQueue
				} else if o.maxQueue < 1 {
					return fmt.Errorf("--max-queue %d: at least 1 request must be able to wait for the model", o.maxQueue)
				}
				return a.serve(cmd.Context(), o)
			},
		}
		f := cmd.Flags()
		f.StringVar(&o.addr, "addr", "", "listen address (default serve.addr, 127.0.0.1:8080)")
		f.StringVar(&o.model, "model", "", "serve the registered model of this name at --tag, and reload it when the tag moves")
		f.StringVar(&o.tag, "tag", "production", "registry tag of the served model")
		f.StringVar(&o.modelRun, "model-run", "", "serve the checkpoint output of a run's node: RUN/NODE or RUN/NODE/OUTPUT (default output model)")
		f.StringVar(&o.modelDir, "model-dir", "", "serve a tagger saved in a local directory (tagger.json, weights.pt)")
		f.StringVar(&o.device, "device", "cpu", "device of the served model: cpu or cuda:N")
		f.IntVar(&o.workers, "workers", -1, "nodes executed at once in this process (default: the CPUs in embedded mode, none with --redis)")
		f.BoolVar(&o.scheduler, "scheduler", false, "also fire the cron schedules in this process (always in embedded mode)")
		f.IntVar(&o.maxBatch, "max-batch", 64, "most sentences tagged in one forward pass")
		f.DurationVar(&o.maxWait, "max-wait", 2*time.Millisecond, "how long a request waits for others to share its forward pass")
		f.IntVar(&o.maxQueue, "max-queue", 0, "most prediction requests waiting for the model; more are refused with 503 and Retry-After (default serve.max_queue, 1024)")
		f.DurationVar(&o.reloadInterval, "reload-interval", 10*time.Second, "how often the model's source is checked for a new version")
		return cmd
	})
}

func (a *app) serve(ctx context.Context, o serveOptions) error {
	if err := checkDevice(o.device); err != nil {
		return err
	}
	given := 0
	for _, v := range []string{o.model, o.modelRun, o.modelDir} {
		if v != "" {
			given++
		}
	}
	if given > 1 {
		return errors.New("give one of --model, --model-run and --model-dir")
	}
	if o.model != "" {
		if err := registry.ValidateName(o.model); err != nil {
			return err
		}
		if err := registry.ValidateTag(o.tag); err != nil {
			return err
		}
	}
	c, err := a.serveEngine(ctx, o)
	if err != nil {
		return err
	}
	defer c.close()
	schedules := schedule.NewStore(c.rdb, a.cfg.Redis.Namespace)
	if o.scheduler || a.cfg.Redis.Addr == "" {
		sch := schedule.New(schedules, c.engine, schedule.WithLogger(a.log))
		go func() {
			if err := sch.Run(ctx); err != nil && ctx.Err() == nil {
				a.log.Error("scheduler stopped", "err", err)
			}
		}()
	}
	regOpts := []registry.Option{registry.WithLogger(a.log)}
	if a.cfg.Redis.Addr != "" {
		regOpts = append(regOpts, registry.WithRedis(c.rdb, a.cfg.Redis.Namespace))
	}
	reg := registry.New(c.store, regOpts...)
	opts := []server.Option{
		server.WithLogger(a.log),
		server.WithNodeLogs(nodelog.NewReader(c.rdb, a.cfg.Redis.Namespace)),
		server.WithWorkers(backend.NewWorkerList(c.rdb, a.cfg.Redis.Namespace)),
		server.WithModels(backend.NewModelRegistry(reg)),
		server.WithSchedules(backend.NewScheduleList(schedules)),
		server.WithQueues(backend.NewQueueInspector(c.rdb, a.cfg.Redis.Namespace)),
		server.WithMetrics(metrics.Handler(metrics.NewRegistry(metrics.NewCollector(c.engine, c.rdb, a.cfg.Redis.Namespace, a.log)))),
	}
	if given > 0 {
		b, name, err := a.servedModel(ctx, c, reg, o)
		if err != nil {
			return err
		}
		defer b.Close()
		opts = append(opts, server.WithPredictor(b, name))
	}
	srv, err := server.New(c.engine, a.cfg.Serve.Token, opts...)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return err
	}
	hs := srv.HTTPServer()
	a.log.Info("serving", "addr", "http://"+ln.Addr().String(), "embedded", a.cfg.Redis.Addr == "")
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	a.log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return hs.Shutdown(sctx)
}

// serveEngine connects to the cluster, or starts an in-process Redis for
// embedded mode, and starts the in-process workers asked for.
func (a *app) serveEngine(ctx context.Context, o serveOptions) (*conn, error) {
	// Without a Redis server, connect starts an in-process one: the
	// embedded cluster of this process.
	c, err := a.connect(ctx, false)
	if err != nil {
		return nil, err
	}
	if a.cfg.Redis.Addr == "" {
		if o.workers < 0 {
			o.workers = runtime.NumCPU()
		}
		a.log.Warn("embedded mode: runs submitted here execute in this process and live as long as it (give --redis for a cluster)")
	}
	if o.workers > 0 {
		// In-process workers advertise themselves like any other: the
		// workers page lists them. Embedded mode serves the gpu queue on
		// the CPU, as nerflow run does.
		pool, err := workers.Start(c.engine, c.rdb, a.cfg.Redis.Namespace, workers.Config{
			Queues: []string{"gpu", "cpu"}, Devices: []string{o.device}, Concurrency: o.workers,
			GPUOnCPU: a.cfg.Redis.Addr == "", Name: "serve",
			Worker: engine.WorkerOptions{Idle: a.releaseMemory},
		}, a.log)
		if err != nil {
			c.close()
			return nil, err
		}
		closeConn := c.close
		c.close = func() { pool.Shutdown(); closeConn() }
	}
	return c, nil
}

// servedModel loads the model to serve and keeps it current.
func (a *app) servedModel(ctx context.Context, c *conn, reg *registry.Registry, o serveOptions) (*predict.Batcher, string, error) {
	device, err := tagger.ParseDevice(o.device)
	if err != nil {
		return nil, "", err
	}
	b := predict.NewBatcher(nil, predict.Options{MaxBatch: o.maxBatch, MaxWait: o.maxWait, Queue: o.maxQueue})
	if o.modelDir != "" {
		m, err := predict.LoadDir(o.modelDir, device, predict.Info{Name: o.modelDir})
		if err != nil {
			b.Close()
			return nil, "", err
		}
		b.Swap(m)
		return b, o.modelDir, nil
	}
	var (
		src  predict.Source
		name string
	)
	if o.model != "" {
		src, name = predict.TaggedSource(reg, o.model, o.tag), o.model
	} else if src, name, err = runOutputSource(c.engine, o.modelRun); err != nil {
		b.Close()
		return nil, "", err
	}
	w := predict.NewWatcher(b, c.store, src, device, a.log)
	if _, err := w.Check(ctx); err != nil {
		if o.model == "" {
			b.Close()
			return nil, "", err
		}
		// A tag that points nowhere yet is no reason not to serve the
		// API: predictions answer 503 until a version gets the tag.
		a.log.Warn("no model to serve yet; checking again every "+o.reloadInterval.String(), "model", o.model, "tag", o.tag, "err", err)
	}
	go w.Run(ctx, o.reloadInterval)
	return b, name, nil
}

// runOutputSource serves a run node's checkpoint output: RUN/NODE or
// RUN/NODE/OUTPUT. A retried run may produce it anew; the watcher then
// reloads it.
func runOutputSource(e *engine.Engine, ref string) (predict.Source, string, error) {
	parts := strings.SplitN(ref, "/", 3)
	if len(parts) < 2 || parts[0] == "" || parts[1] == "" {
		return nil, "", fmt.Errorf("--model-run %q: want RUN/NODE or RUN/NODE/OUTPUT", ref)
	}
	run, node, output := parts[0], parts[1], "model"
	if len(parts) == 3 {
		output = parts[2]
	}
	src := predict.SourceFunc(func(ctx context.Context) (stages.Artifact, predict.Info, error) {
		st, err := e.Status(ctx, run)
		if err != nil {
			return stages.Artifact{}, predict.Info{}, err
		}
		n, ok := st.Node(node)
		if !ok {
			return stages.Artifact{}, predict.Info{}, fmt.Errorf("run %s has no node %q", run, node)
		}
		art, ok := n.Outputs[output]
		if !ok {
			return stages.Artifact{}, predict.Info{}, fmt.Errorf("node %s of run %s (%s) has no output %q", node, run, n.State, output)
		}
		return art, predict.Info{Name: node, Version: run}, nil
	})
	return src, node, nil
}
