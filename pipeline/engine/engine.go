// Package engine runs pipeline graphs as DAGs of asynq tasks.
//
// asynq has no notion of dependencies; this package adds them. A run is a
// graph (package spec) plus its state in Redis: one state per node, a
// counter of unfinished parents per node, and the run's own state. Ready
// nodes are enqueued as asynq tasks with TaskID "RUN/NODE" on the node's
// queue (cpu or gpu). A worker executing a node computes the node key from
// the stage, its parameters and its input digests; if the store holds
// outputs for the key the node is cached, otherwise the stage runs. Then a
// Lua script marks the node finished exactly once and releases the children
// whose parents are all finished; enqueuing them is idempotent thanks to the
// task ids, so a handler that runs twice (or dies halfway) is harmless.
// Failed attempts are retried by asynq; when the retries are exhausted the
// node fails, the run fails and nodes not started are cancelled.
//
// Faults: a node key is computed by one execution at a time across runs
// (lock.go); outages of the store or Redis are waited out without spending
// attempts (worker.go); nodes whose worker died are enqueued again by the
// workers' reconciler (lost.go); and a run whose Redis state vanished is
// rebuilt from its manifest and the node records in the store (restore.go).
//
// The same code serves a cluster (real Redis, workers in other processes,
// `nerflow submit`) and embedded mode (in-process miniredis and workers,
// `nerflow run`, see Embedded).
package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/storage"
	"github.com/nerflow/nerflow/storage/layout"
)

// TaskType is the asynq task type of node executions.
const TaskType = "nerflow:node"

// Engine submits, observes and controls runs, and executes nodes (see
// Worker). It is safe for concurrent use.
type Engine struct {
	rdb       redis.UniversalClient
	client    *asynq.Client
	inspector *asynq.Inspector
	store     storage.Store
	log       *slog.Logger
	ns        string
	retention time.Duration
	maxNode   time.Duration
	runTTL    time.Duration
	// restoreDelay holds back the nodes queued again by a restore (see
	// restore); lostGrace is how long a running node may go unlisted by
	// every live asynq server before it counts as lost (see lost.go).
	restoreDelay time.Duration
	lostGrace    time.Duration
	// privateRedis: see WithPrivateRedis.
	privateRedis bool

	mu     sync.Mutex
	graphs map[string]*runInfo // run id -> graph and datasets (immutable per run)
}

// Option configures an Engine.
type Option func(*Engine)

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(e *Engine) { e.log = l } }

// WithNamespace prefixes every Redis key of the engine and the names of its
// asynq queues (default "nerflow": queues "nerflow:cpu" and "nerflow:gpu").
// Engines in different namespaces share a Redis server without seeing each
// other's runs or tasks.
func WithNamespace(ns string) Option { return func(e *Engine) { e.ns = ns } }

// WithRetention sets how long asynq keeps finished tasks (default 24h).
// Kept task ids are what makes a repeated enqueue of a finished node a
// no-op, so it should outlast any handler that could run twice.
func WithRetention(d time.Duration) Option { return func(e *Engine) { e.retention = d } }

// WithMaxNodeDuration bounds one attempt of a node whose stage declares no
// timeout (default 7 days). asynq gives every task a timeout (30 minutes
// unless told otherwise); liveness of long attempts comes from asynq's
// lease, renewed every few seconds while the worker is alive, not from this.
func WithMaxNodeDuration(d time.Duration) Option { return func(e *Engine) { e.maxNode = d } }

// WithRunTTL sets how long Redis keeps a finished run's state (default 7
// days); `nerflow retry` needs it, `status` and `artifacts` fall back to the
// run manifest in the store.
func WithRunTTL(d time.Duration) Option { return func(e *Engine) { e.runTTL = d } }

// WithRestoreDelay sets how long nodes queued again by the restore of a
// run that Redis lost wait before they start (default 10s). It must exceed
// a third of the workers' NodeLease plus the time their Redis clients take
// to reconnect (go-redis retries a failed dial about every second), so that
// a worker still executing such a node re-claims its key first and the
// restored task waits for it instead of computing the node again.
func WithRestoreDelay(d time.Duration) Option { return func(e *Engine) { e.restoreDelay = d } }

// WithPrivateRedis says that the engine's Redis was born empty with this
// process and only it can reach it (an in-process Redis: nerflow run, or a
// command run without a Redis server). A live run that it does not know is
// then another process's, whose Redis state it cannot see: Status shows
// that run as the store recorded it, and nothing takes it over here (no
// restore, no node queued again), where an engine on a shared Redis
// restores a run that Redis lost (see restore).
func WithPrivateRedis() Option { return func(e *Engine) { e.privateRedis = true } }

// New returns an engine over a Redis client and an artifact store. The
// caller keeps ownership of both.
func New(rdb redis.UniversalClient, store storage.Store, opts ...Option) *Engine {
	e := &Engine{
		rdb: rdb, store: store, log: slog.Default(), ns: "nerflow",
		retention: 24 * time.Hour, maxNode: 7 * 24 * time.Hour, runTTL: 7 * 24 * time.Hour,
		restoreDelay: 10 * time.Second, lostGrace: 15 * time.Second,
		graphs: map[string]*runInfo{},
	}
	for _, o := range opts {
		o(e)
	}
	e.client = asynq.NewClientFromRedisClient(rdb)
	e.inspector = asynq.NewInspectorFromRedisClient(rdb)
	return e
}

// Close releases the asynq client and inspector (not the Redis client or
// the store).
func (e *Engine) Close() error {
	return errors.Join(e.client.Close(), e.inspector.Close())
}

// Store is the engine's artifact store.
func (e *Engine) Store() storage.Store { return e.store }

// runInfo is what a run keeps immutable: its graph and imported datasets.
type runInfo struct {
	graph    *spec.Graph
	datasets map[string]stages.Artifact
}

// SubmitOptions describes a submission.
type SubmitOptions struct {
	// Spec is the spec's text, kept in the run manifest for the record.
	Spec []byte
	// SpecFile names where it came from.
	SpecFile string
	// Overrides are the --set values applied to it.
	Overrides []string
	// ID, when set, is the run's id instead of a new one: a submitter
	// that may submit the same run twice (a scheduler that took over a
	// tick from one that died) names it, and the second Submit fails with
	// ErrRunExists. An id is a store key segment.
	ID string
}

// ErrRunExists is Submit's error for an ID that names an existing run.
var ErrRunExists = errors.New("a run with this id exists")

// Submit creates a run of graph g and enqueues its roots. External datasets
// are imported into the store first (local paths are read by this process,
// so submit from a machine that has them). It returns the run id.
func (e *Engine) Submit(ctx context.Context, g *spec.Graph, opts SubmitOptions) (string, error) {
	datasets, err := e.ImportDatasets(ctx, g)
	if err != nil {
		return "", err
	}
	id := opts.ID
	if id == "" {
		id = newRunID()
	} else if err := storage.ValidateKey(id); err != nil || strings.Contains(id, "/") {
		return "", fmt.Errorf("run id %q: not one key segment", id)
	} else if _, err := e.store.Stat(ctx, layout.RunManifest(id)); err == nil {
		return id, fmt.Errorf("run %s: %w", id, ErrRunExists)
	} else if !errors.Is(err, storage.ErrNotFound) {
		return "", fmt.Errorf("looking up run %s: %w", id, err)
	}
	graphJSON, err := json.Marshal(g)
	if err != nil {
		return "", fmt.Errorf("encoding graph: %w", err)
	}
	dsJSON, _ := json.Marshal(datasets)
	now := time.Now().UTC()
	k := runKeys(e.ns, id)
	create := func(p redis.Pipeliner) error {
		p.HSet(ctx, k.meta(), map[string]any{
			"id": id, "name": g.Name, "state": Running, "created_at": now.Format(time.RFC3339Nano),
			"graph": graphJSON, "datasets": dsJSON, "unfinished": len(g.Nodes),
			"spec": opts.Spec, "spec_file": opts.SpecFile, "overrides": mustJSON(opts.Overrides),
		})
		states := make(map[string]any, len(g.Nodes))
		waiting := make(map[string]any, len(g.Nodes))
		for _, n := range g.Nodes {
			states[n.ID] = Pending
			if len(n.Parents) == 0 {
				states[n.ID] = Queued
			}
			waiting[n.ID] = len(n.Parents)
		}
		p.HSet(ctx, k.states(), states)
		p.HSet(ctx, k.waiting(), waiting)
		p.ZAdd(ctx, runsIndex(e.ns), redis.Z{Score: float64(now.UnixMilli()), Member: id})
		return nil
	}
	if opts.ID == "" {
		_, err = e.rdb.TxPipelined(ctx, create)
	} else {
		// Created only if absent: of two submitters of one id, one
		// creates the run and the other learns that it exists.
		err = e.rdb.Watch(ctx, func(tx *redis.Tx) error {
			n, err := tx.Exists(ctx, k.meta()).Result()
			if err != nil {
				return err
			}
			if n > 0 {
				return ErrRunExists
			}
			_, err = tx.TxPipelined(ctx, create)
			return err
		}, k.meta())
		if errors.Is(err, redis.TxFailedErr) {
			err = ErrRunExists
		}
		if errors.Is(err, ErrRunExists) {
			return id, fmt.Errorf("run %s: %w", id, err)
		}
	}
	if err != nil {
		return "", fmt.Errorf("creating run: %w", err)
	}
	e.mu.Lock()
	e.graphs[id] = &runInfo{graph: g, datasets: datasets}
	e.mu.Unlock()
	// The manifest and the live marker are what a run is rebuilt from if
	// Redis loses its data: without them the run would not be durable.
	err = e.writeManifest(ctx, id)
	if err == nil {
		_, err = storage.PutBytes(ctx, e.store, layout.LiveMarker(id), []byte(id))
	}
	if err != nil {
		// Nothing was enqueued: withdraw the run rather than leave it
		// running with no task.
		msg := fmt.Sprintf("submit could not record the run in the store: %v", err)
		if cerr := cancelScript.Run(context.WithoutCancel(ctx), e.rdb, []string{k.states(), k.meta()}, nowString(), msg).Err(); cerr != nil && !errors.Is(cerr, redis.Nil) {
			e.log.Warn("withdrawing run", "run", id, "err", cerr)
		}
		return id, fmt.Errorf("recording run %s in the store: %w", id, err)
	}
	for _, n := range g.Roots() {
		if err := e.enqueue(ctx, id, n); err != nil {
			return id, err
		}
	}
	e.log.Info("run submitted", "run", id, "name", g.Name, "nodes", len(g.Nodes), "datasets", len(datasets))
	return id, nil
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func newRunID() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return time.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

type payload struct {
	Run  string `json:"run"`
	Node string `json:"node"`
	// Parents holds the outputs (JSON) of the node's parents when the one
	// that enqueued it knew them all: its only parent, completing. With
	// them (or with no parents at all) the worker knows the node key
	// before its first round trip and claims the key in it (early.go). A
	// hint: the start script's answer decides.
	Parents map[string]json.RawMessage `json:"parents,omitempty"`
}

// enqueue puts node n of run on its queue. An existing task with the same
// id means it is already enqueued (or was executed): not an error.
func (e *Engine) enqueue(ctx context.Context, run string, n *spec.Node) error {
	return e.enqueueAs(ctx, run, n, taskID(run, n.ID), 0, nil)
}

// enqueueAs enqueues node n under task id id, to be processed after delay,
// with the outputs of its parents when the caller knows them all.
func (e *Engine) enqueueAs(ctx context.Context, run string, n *spec.Node, id string, delay time.Duration, parents map[string]json.RawMessage) error {
	timeout := n.Timeout
	if timeout <= 0 {
		timeout = e.maxNode
	}
	b, _ := json.Marshal(payload{Run: run, Node: n.ID, Parents: parents})
	t := asynq.NewTask(TaskType, b,
		asynq.TaskID(id), asynq.Queue(e.queue(n.Queue)), asynq.MaxRetry(n.MaxRetries),
		asynq.Timeout(timeout), asynq.Retention(e.retention), asynq.ProcessIn(delay))
	_, err := e.client.EnqueueContext(ctx, t)
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		// Callers enqueue only nodes in state queued, which no live task
		// has consumed yet. A task under the id that is finished (completed
		// or archived) is therefore left over from an earlier attempt of
		// the run (before a retry): replace it. A live one is this node's.
		info, ierr := e.inspector.GetTaskInfo(e.queue(n.Queue), id)
		if ierr != nil || (info.State != asynq.TaskStateCompleted && info.State != asynq.TaskStateArchived) {
			return nil
		}
		if err := e.inspector.DeleteTask(e.queue(n.Queue), info.ID); err != nil && !errors.Is(err, asynq.ErrTaskNotFound) {
			return fmt.Errorf("replacing finished task %s: %w", info.ID, err)
		}
		_, err = e.client.EnqueueContext(ctx, t)
		if errors.Is(err, asynq.ErrTaskIDConflict) {
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("enqueuing %s/%s: %w", run, n.ID, err)
	}
	return nil
}

// clearTask removes the asynq task of node n of run, waiting (up to
// timeout) for it to leave the active state: the handler that failed a run
// returns to asynq only after recording the failure.
func (e *Engine) clearTask(ctx context.Context, run string, n *spec.Node, timeout time.Duration) error {
	q, id := e.queue(n.Queue), taskID(run, n.ID)
	deadline := time.Now().Add(timeout)
	for {
		info, err := e.inspector.GetTaskInfo(q, id)
		if errors.Is(err, asynq.ErrTaskNotFound) || errors.Is(err, asynq.ErrQueueNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if info.State != asynq.TaskStateActive {
			err := e.inspector.DeleteTask(q, id)
			if err == nil || errors.Is(err, asynq.ErrTaskNotFound) {
				return nil
			}
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("task %s is still running", id)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// queue is the asynq queue of spec queue q.
func (e *Engine) queue(q string) string { return e.ns + ":" + q }

// info returns the run's graph and datasets, loading them once per run.
func (e *Engine) info(ctx context.Context, run string) (*runInfo, error) {
	e.mu.Lock()
	ri := e.graphs[run]
	e.mu.Unlock()
	if ri != nil {
		return ri, nil
	}
	vals, err := e.rdb.HMGet(ctx, runKeys(e.ns, run).meta(), "graph", "datasets").Result()
	if err != nil {
		return nil, fmt.Errorf("loading run %s: %w", run, err)
	}
	gs, _ := vals[0].(string)
	if gs == "" {
		// Redis may have lost the run: its manifest in the store has the
		// graph (and the datasets) too.
		m, merr := e.RunManifest(ctx, run)
		if merr != nil || m.Graph == nil {
			return nil, fmt.Errorf("run %s: %w", run, ErrNoRun)
		}
		ri = &runInfo{graph: m.Graph, datasets: m.Datasets}
		if ri.datasets == nil {
			ri.datasets = map[string]stages.Artifact{}
		}
		e.cacheInfo(run, ri)
		return ri, nil
	}
	g, err := spec.UnmarshalGraph([]byte(gs))
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", run, err)
	}
	ri = &runInfo{graph: g, datasets: map[string]stages.Artifact{}}
	if ds, _ := vals[1].(string); ds != "" {
		if err := json.Unmarshal([]byte(ds), &ri.datasets); err != nil {
			return nil, fmt.Errorf("run %s: datasets: %w", run, err)
		}
	}
	e.cacheInfo(run, ri)
	return ri, nil
}

func (e *Engine) cacheInfo(run string, ri *runInfo) {
	e.mu.Lock()
	if len(e.graphs) >= maxCachedGraphs {
		clear(e.graphs) // a long-lived worker sees many runs; reload on demand
	}
	e.graphs[run] = ri
	e.mu.Unlock()
}

const maxCachedGraphs = 256

// ErrNoRun is returned for a run id that neither Redis nor the store knows.
var ErrNoRun = errors.New("no such run")

func nowString() string { return time.Now().UTC().Format(time.RFC3339Nano) }

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }
