package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/storage"
)

// WorkerOptions configures a worker.
type WorkerOptions struct {
	// Queues to take nodes from, highest priority first (default cpu, gpu).
	// A queue later in the list is served only when the earlier ones are
	// empty.
	Queues []string
	// Concurrency is the number of nodes executed at once (default 1).
	Concurrency int
	// Device is given to stages: "cpu" or "cuda:N" (default "cpu").
	Device string
	// ShutdownTimeout is how long Shutdown waits for running nodes before
	// handing them back to their queue (default 10s).
	ShutdownTimeout time.Duration
	// PollInterval is how often an idle worker looks for tasks. It bounds
	// the delay between a node finishing and its child starting (default
	// 10ms; asynq's own default of 1s would add up to a second per edge).
	PollInterval time.Duration
	// RetryDelay is the wait before retrying a failed attempt n (0-based);
	// default 2s·2ⁿ, capped at 5 minutes. A task whose worker died is
	// retried without delay.
	RetryDelay func(n int) time.Duration
	// DelayedPollInterval is how often retries that are due are moved back
	// to their queue (default 1s).
	DelayedPollInterval time.Duration
	// TempDir is the parent of stages' work directories.
	TempDir string
	// ProgressInterval throttles progress writes to Redis (default 500ms).
	ProgressInterval time.Duration
	// Name identifies the worker in node states (default host:pid).
	Name string
	// NodeLease is how long a node key stays claimed by an execution that
	// stops renewing it (a dead worker); it is renewed every third of it.
	// A second execution of the same key, in this run or another, waits for
	// the first instead of computing it too (default 15s).
	NodeLease time.Duration
	// ReconcileInterval is how often the worker checks, for the namespace,
	// that every live run has its state in Redis (restoring it from the
	// store when Redis lost it) and re-drives nodes whose worker is gone
	// (default 5s; one worker of the namespace does it per interval).
	ReconcileInterval time.Duration
	// OutagePatience is how long a node waits out an unreachable store or
	// Redis, retrying with capped back-off, before the outage counts as a
	// failed attempt (default 10 minutes). Waiting spends no attempt.
	OutagePatience time.Duration

	// Idle, if set, is called (in a goroutine of its own) each time the
	// last node this worker runs has ended: the process can hand the
	// memory of its last node back to the system there (see
	// allocator.Release).
	Idle func()
}

// Worker executes nodes from the engine's queues with an asynq server.
type Worker struct {
	e    *Engine
	opts WorkerOptions
	srv  *asynq.Server
	host string // as asynq's server info names it
	stop chan struct{}
	done chan struct{}
	// leases are the node-key leases held by running nodes (*keyLease):
	// released on Shutdown, since asynq hands the tasks back without
	// waiting for their handlers.
	leases sync.Map
	// running counts the nodes being handled, for Idle.
	running atomic.Int64
}

// NewWorker returns a worker; Start it, then Shutdown.
func (e *Engine) NewWorker(opts WorkerOptions) *Worker {
	if len(opts.Queues) == 0 {
		opts.Queues = []string{"cpu", "gpu"}
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 1
	}
	if opts.Device == "" {
		opts.Device = "cpu"
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = 10 * time.Second
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = 10 * time.Millisecond
	}
	if opts.DelayedPollInterval <= 0 {
		opts.DelayedPollInterval = time.Second
	}
	if opts.ProgressInterval <= 0 {
		opts.ProgressInterval = 500 * time.Millisecond
	}
	if opts.RetryDelay == nil {
		opts.RetryDelay = func(n int) time.Duration {
			d := 2 * time.Second << min(n, 8)
			return min(d, 5*time.Minute)
		}
	}
	if opts.Name == "" {
		host, _ := os.Hostname()
		opts.Name = host + ":" + strconv.Itoa(os.Getpid())
	}
	if opts.NodeLease <= 0 {
		opts.NodeLease = 15 * time.Second
	}
	if opts.ReconcileInterval <= 0 {
		opts.ReconcileInterval = 5 * time.Second
	}
	if opts.OutagePatience <= 0 {
		opts.OutagePatience = 10 * time.Minute
	}
	queues := map[string]int{}
	for i, q := range opts.Queues {
		queues[e.queue(q)] = len(opts.Queues) - i
	}
	host, _ := os.Hostname()
	w := &Worker{e: e, opts: opts, host: host, stop: make(chan struct{}), done: make(chan struct{})}
	w.srv = asynq.NewServerFromRedisClient(e.rdb, asynq.Config{
		Concurrency:              opts.Concurrency,
		Queues:                   queues,
		StrictPriority:           true,
		ShutdownTimeout:          opts.ShutdownTimeout,
		TaskCheckInterval:        opts.PollInterval,
		DelayedTaskCheckInterval: opts.DelayedPollInterval,
		RetryDelayFunc: func(n int, err error, _ *asynq.Task) time.Duration {
			if errors.Is(err, asynq.ErrLeaseExpired) {
				return 0
			}
			if !isFailure(err) {
				return min(opts.RetryDelay(0), 5*time.Second)
			}
			return opts.RetryDelay(n)
		},
		// A dead worker or a server away is not the node's fault: such
		// errors spend no attempt.
		IsFailure: isFailure,
		Logger:    newAsynqLogger(e.log.With("component", "asynq"), 30*time.Second),
		LogLevel:  asynq.WarnLevel,
	})
	return w
}

// Start begins taking tasks.
func (w *Worker) Start() error {
	mux := asynq.NewServeMux()
	mux.HandleFunc(TaskType, w.handle)
	if err := w.srv.Start(mux); err != nil {
		return fmt.Errorf("starting worker: %w", err)
	}
	go w.reconcileLoop()
	w.e.log.Info("worker started", "worker", w.opts.Name, "queues", w.opts.Queues, "concurrency", w.opts.Concurrency, "device", w.opts.Device)
	return nil
}

// Shutdown stops taking tasks, waits up to ShutdownTimeout for running
// nodes, and hands those still running back to their queue.
func (w *Worker) Shutdown() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
		<-w.done
	}
	w.srv.Shutdown()
	w.leases.Range(func(k, v any) bool {
		v.(*keyLease).stop()
		return true
	})
}

// isFailure says whether a handler error counts as a failed attempt.
func isFailure(err error) bool {
	if errors.Is(err, errGaveUp) {
		return true
	}
	return err != nil && !errors.Is(err, asynq.ErrLeaseExpired) && !storage.IsTransient(err)
}

// maxOutageBackoff caps the wait between tries while a server is away: it
// is also how long a node may sit idle after the server came back.
const maxOutageBackoff = 10 * time.Second

var (
	// errGaveUp wraps an outage that outlasted OutagePatience: it counts
	// as a failed attempt after all.
	errGaveUp = errors.New("store or Redis unreachable for")
	// errKeyTaken says another execution took over the node key.
	errKeyTaken = errors.New("another execution took over the node key")
)

func (w *Worker) handle(ctx context.Context, t *asynq.Task) error {
	var p payload
	if err := json.Unmarshal(t.Payload(), &p); err != nil {
		return fmt.Errorf("%w: bad task payload: %v", asynq.SkipRetry, err)
	}
	w.running.Add(1)
	defer func() {
		if w.running.Add(-1) == 0 && w.opts.Idle != nil {
			go w.opts.Idle()
		}
	}()
	err := w.execute(ctx, p)
	if err != nil && !errors.Is(err, asynq.SkipRetry) && ctx.Err() == nil {
		w.e.log.Warn("node attempt failed", "run", p.Run, "node", p.Node, "err", err)
	}
	return err
}

// waitBackoff sleeps for *backoff, then doubles it up to maxOutageBackoff;
// it reports false if ctx ended first.
func waitBackoff(ctx context.Context, backoff *time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(*backoff):
	}
	*backoff = min(2**backoff, maxOutageBackoff)
	return true
}

// patiently runs f until it succeeds, fails for another reason than an
// outage, or the outage outlasts OutagePatience.
func (w *Worker) patiently(ctx context.Context, log *slog.Logger, f func() error) error {
	start := time.Now()
	backoff := 500 * time.Millisecond
	for {
		err := f()
		if err == nil || !storage.IsTransient(err) || time.Since(start) > w.opts.OutagePatience {
			return err
		}
		log.Debug("Redis unreachable; retrying", "err", err, "next try in", backoff)
		if !waitBackoff(ctx, &backoff) {
			return err
		}
	}
}

// validateInputs checks that each input's digest, of which the node key is
// made, is the digest of its manifest's content, of a format this worker
// reads.
func validateInputs(inputs map[string][]stages.Artifact) error {
	for port, arts := range inputs {
		for _, a := range arts {
			if err := a.Validate(); err != nil {
				return stages.Permanent(fmt.Errorf("input %s (%s): %w", port, a.Prefix, err))
			}
		}
	}
	return nil
}

// start moves node n of run to running (see startScript). It returns the
// state to act on, the node's re-drive count and, for a node to run, its
// parents' outputs.
// mark, if not nil, are the script's optional arguments (the failed
// attempts and who runs the node); with adds commands to its pipeline.
func (e *Engine) start(ctx context.Context, run string, n *spec.Node, mark []any, with func(redis.Pipeliner)) (string, int, map[string]map[string]stages.Artifact, error) {
	k := runKeys(e.ns, run)
	keys := append([]string{k.states(), k.meta(), k.node(n.ID)}, k.nodeKeys(n.Parents)...)
	args := append([]any{n.ID}, mark...)
	var res []any
	var err error
	if with == nil {
		res, err = startScript.Run(ctx, e.rdb, keys, args...).Slice()
	} else {
		var cmd *redis.Cmd
		_, _ = e.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			cmd = startScript.EvalSha(ctx, p, keys, args...)
			with(p)
			return nil
		})
		res, err = cmd.Slice()
		if redis.HasErrorPrefix(err, "NOSCRIPT") {
			// Redis lost its scripts (a restart): Run loads it again.
			res, err = startScript.Run(ctx, e.rdb, keys, args...).Slice()
		}
	}
	if err != nil {
		return "", 0, nil, fmt.Errorf("starting node: %w", err)
	}
	if len(res) < 2 {
		return "", 0, nil, fmt.Errorf("starting node: unexpected reply %v", res)
	}
	state, _ := res[0].(string)
	redrives, _ := res[1].(int64)
	if state != Running {
		return state, int(redrives), nil, nil
	}
	if len(res) != 2+len(n.Parents) {
		return "", 0, nil, fmt.Errorf("starting node: %d parents' outputs for %d parents", len(res)-2, len(n.Parents))
	}
	outputs := make(map[string]map[string]stages.Artifact, len(n.Parents))
	for i, pid := range n.Parents {
		s, _ := res[2+i].(string)
		if s == "" {
			return "", 0, nil, stages.Permanent(fmt.Errorf("parent %s has no outputs recorded", pid))
		}
		var outs map[string]stages.Artifact
		if err := json.Unmarshal([]byte(s), &outs); err != nil {
			return "", 0, nil, fmt.Errorf("reading outputs of %s: %w", pid, err)
		}
		outputs[pid] = outs
	}
	return state, int(redrives), outputs, nil
}

// complete records node n as finished, with its outputs (JSON) unless they
// are nil, and enqueues the children it released (or, on a repeat, any
// child still waiting to be enqueued).
func (e *Engine) complete(ctx context.Context, run string, ri *runInfo, n *spec.Node, final string, outputs []byte) error {
	return e.completeKey(ctx, run, ri, n, final, outputs, "")
}

// completeKey is complete that also records the node key of the outputs:
// the hash may have lost it (Redis restarted empty while the node ran).
func (e *Engine) completeKey(ctx context.Context, run string, ri *runInfo, n *spec.Node, final string, outputs []byte, key string) error {
	k := runKeys(e.ns, run)
	argv := append([]any{n.ID, final, nowString(), string(outputs), key}, anyStrings(n.Children)...)
	res, err := completeScript.Run(ctx, e.rdb, []string{k.states(), k.waiting(), k.meta(), k.node(n.ID)}, argv...).Slice()
	if err != nil {
		return fmt.Errorf("completing node: %w", err)
	}
	transition, _ := res[0].(int64)
	ready, _ := res[1].([]any)
	suffixes, _ := res[2].([]any)
	for i, r := range ready {
		child, _ := ri.graph.Node(r.(string))
		if child == nil {
			continue
		}
		id := taskID(run, child.ID)
		if i < len(suffixes) {
			if s, _ := suffixes[i].(string); s != "" {
				id += "~r" + s
			}
		}
		// A child whose only parent this is gets its inputs in the task
		// (see early.go), unless they would make the task large: asynq
		// keeps it in Redis for the retention period.
		var parents map[string]json.RawMessage
		if outputs != nil && len(outputs) <= maxParentsHint && len(child.Parents) == 1 && child.Parents[0] == n.ID {
			parents = map[string]json.RawMessage{n.ID: outputs}
		}
		if err := e.enqueueAs(ctx, run, child, id, 0, parents); err != nil {
			return err
		}
	}
	if transition == 2 {
		e.log.Info("run succeeded", "run", run)
		if err := e.finishRun(ctx, run); err != nil {
			e.log.Warn("writing run manifest", "run", run, "err", err)
		}
	}
	return nil
}

// progressWriter forwards a stage's progress to Redis, at most once per
// ProgressInterval (the last report of a burst may be dropped; the next one
// replaces it anyway).
func (w *Worker) progressWriter(run, node string) func(stages.ProgressUpdate) {
	var mu sync.Mutex
	var last, failed time.Time
	key := runKeys(w.e.ns, run).node(node)
	return func(p stages.ProgressUpdate) {
		mu.Lock()
		now := time.Now()
		// After a failed write, Redis is left alone for a while: the stage
		// calls this inline and must not wait for an absent server.
		if now.Sub(last) < w.opts.ProgressInterval && (p.Total == 0 || p.Done < p.Total) || now.Sub(failed) < 5*time.Second {
			mu.Unlock()
			return
		}
		last = now
		mu.Unlock()
		b, _ := json.Marshal(p)
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		if err := w.e.rdb.HSet(ctx, key, "progress", b).Err(); err != nil {
			mu.Lock()
			failed = time.Now()
			mu.Unlock()
			w.e.log.Debug("progress not recorded", "node", node, "err", err)
		}
	}
}

func anyStrings(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
