package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/nerflow/nerflow/storage"
	"github.com/nerflow/nerflow/storage/layout"
)

// Dead workers. asynq's own server heartbeat is the source of truth for
// whether the worker executing a node is alive: every asynq server writes
// its info, with the tasks it is executing, every 5 seconds under a key that
// expires after 10 (constants of asynq). A running node whose task no live
// server lists is lost. asynq itself re-queues such a task only when its
// lease has been expired for 30 s and its recoverer looks (every minute):
// up to two minutes, all constants of asynq. The reconciler does not wait
// for that: it enqueues the node again under a new task id, and the new
// execution waits at most one NodeLease for the dead one's claim on the
// node key to lapse. A node counts as lost once its server's heartbeat
// expired (at most 10 s after a SIGKILL) and it started at least 15 s ago
// (the listing of a task lags its start by up to a beat); the next pass of
// the reconciler (ReconcileInterval) re-drives it, and the new execution
// starts when the dead one's key lease lapses (NodeLease after its last
// renewal, which runs concurrently). With the defaults the re-run starts
// at most 15 + 5 + 15 = 35 s after the kill, usually 15-20 s.

// liveness is a snapshot of asynq's live servers.
type liveness struct {
	tasks map[string]bool // task ids being executed
	procs map[string]bool // "host:pid" of live servers
	now   time.Time
}

func (e *Engine) liveness() (*liveness, error) {
	servers, err := e.inspector.Servers()
	if err != nil {
		return nil, fmt.Errorf("listing workers: %w", err)
	}
	l := &liveness{tasks: map[string]bool{}, procs: map[string]bool{}, now: time.Now()}
	for _, s := range servers {
		l.procs[s.Host+":"+strconv.Itoa(s.PID)] = true
		for _, w := range s.ActiveWorkers {
			l.tasks[w.TaskID] = true
		}
	}
	return l, nil
}

// self reports whether this process's own asynq servers are in the
// snapshot. Right after Redis lost its data no server is listed until
// its next beat, and every node would look lost.
func (l *liveness) self() bool {
	host, _ := os.Hostname()
	return l.procs[host+":"+strconv.Itoa(os.Getpid())]
}

// lost reports whether the running node whose Redis hash is h has lost its
// worker. A task appears in its server's listing only at the next beat, so
// a recent start counts as lost only when its whole server is gone; and a
// task that asynq holds for a retry (or has not handed out yet) is not lost.
func (e *Engine) lost(l *liveness, queue string, h map[string]string) bool {
	task := h["task"]
	started := parseTime(h["started_at"])
	if task == "" || started == nil || l.tasks[task] {
		return false
	}
	// A task shows in its server's listing at the next beat; a whole
	// server still beating is not dead (a task it lists no more, with the
	// node still running, is re-driven by asynq's own recovery).
	if l.now.Sub(*started) < e.lostGrace || l.procs[h["host"]+":"+h["pid"]] {
		return false
	}
	info, err := e.inspector.GetTaskInfo(e.queue(queue), task)
	switch {
	case errors.Is(err, asynq.ErrTaskNotFound), errors.Is(err, asynq.ErrQueueNotFound):
		return true
	case err != nil:
		return false
	}
	return info.State == asynq.TaskStateActive || info.State == asynq.TaskStateArchived || info.State == asynq.TaskStateCompleted
}

// redriveScript records that the lost execution under task ARGV[1] was
// re-driven, once. KEYS: node hash, states. ARGV: lost task, node id.
// Returns the new re-drive count, or 0 if it was re-driven already or the
// node is no longer running under that task.
var redriveScript = redis.NewScript(`
if redis.call('HGET', KEYS[2], ARGV[2]) ~= 'running' then return 0 end
if redis.call('HGET', KEYS[1], 'task') ~= ARGV[1] then return 0 end
if redis.call('HGET', KEYS[1], 'redriven') == ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'redriven', ARGV[1])
return redis.call('HINCRBY', KEYS[1], 'redrives', 1)
`)

// reconcileLoop runs Reconcile every ReconcileInterval until Shutdown.
func (w *Worker) reconcileLoop() {
	defer close(w.done)
	every := w.opts.ReconcileInterval
	t := time.NewTicker(every)
	defer t.Stop()
	quiet := newRateLimitedLogger(w.e.log, time.Minute)
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 4*every)
		if err := w.e.reconcile(ctx, every, !w.e.privateRedis); err != nil {
			quiet.Warn("reconciling runs", "err", err)
		}
		cancel()
	}
}

// Reconcile makes one pass over the namespace's live runs (those with a
// live marker in the store): a run Redis lost is restored from the store, a
// run that ended is finished, and lost nodes are enqueued again. One caller
// per namespace does the pass per interval; the others return at once.
func (e *Engine) Reconcile(ctx context.Context, interval time.Duration) error {
	return e.reconcile(ctx, interval, true)
}

func (e *Engine) reconcile(ctx context.Context, interval time.Duration, restore bool) error {
	ok, err := e.rdb.SetNX(ctx, e.ns+":reconciler", nowString(), interval*9/10).Result()
	if err != nil || !ok {
		return err
	}
	objs, err := e.store.List(ctx, layout.Live)
	if err != nil {
		return fmt.Errorf("listing live runs: %w", err)
	}
	var l *liveness
	var errs []error
	for _, o := range objs {
		id, ok := layout.RunOfLiveMarker(o.Key)
		if !ok {
			continue
		}
		if !restore {
			if n, err := e.rdb.Exists(ctx, runKeys(e.ns, id).meta()).Result(); err != nil || n == 0 {
				continue
			}
		}
		if err := e.ensureRun(ctx, id); err != nil {
			if errors.Is(err, ErrNoRun) {
				continue
			}
			errs = append(errs, err)
			continue
		}
		k := runKeys(e.ns, id)
		state, err := e.rdb.HGet(ctx, k.meta(), "state").Result()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if state != Running {
			// It ended but its manifest or marker was not written (the
			// store was away then): finish it again.
			if err := e.finishRun(ctx, id); err != nil && !storage.IsTransient(err) {
				errs = append(errs, err)
			}
			continue
		}
		if l == nil {
			if l, err = e.liveness(); err != nil {
				return errors.Join(append(errs, err)...)
			}
		}
		if !l.self() {
			continue // heartbeats not rewritten yet (Redis restarted)
		}
		if err := e.redriveLost(ctx, id, l); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// redriveLost enqueues again the running nodes of run id whose worker is
// gone.
func (e *Engine) redriveLost(ctx context.Context, id string, l *liveness) error {
	ri, err := e.info(ctx, id)
	if err != nil {
		return err
	}
	k := runKeys(e.ns, id)
	states, err := e.rdb.HGetAll(ctx, k.states()).Result()
	if err != nil {
		return err
	}
	for _, n := range ri.graph.Nodes {
		if states[n.ID] != Running {
			continue
		}
		h, err := e.rdb.HGetAll(ctx, k.node(n.ID)).Result()
		if err != nil {
			return err
		}
		if !e.lost(l, n.Queue, h) {
			continue
		}
		count, err := redriveScript.Run(ctx, e.rdb, []string{k.node(n.ID), k.states()}, h["task"], n.ID).Int()
		if err != nil || count == 0 {
			continue
		}
		e.log.Warn("worker lost; node enqueued again", "run", id, "node", n.ID, "worker", h["worker"], "started", h["started_at"])
		if err := e.enqueueAs(ctx, id, n, taskID(id, n.ID)+"~"+strconv.Itoa(count), 0, nil); err != nil {
			return err
		}
	}
	return nil
}
