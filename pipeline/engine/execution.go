package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/storage"
	"github.com/nerflow/nerflow/storage/layout"
)

// execution is one task's execution of a node: what its tries share. A
// task starts the node (the start script), then tries it until it is
// committed or cached, fails, or the run is over; an outage of the store or
// Redis is waited out between tries. The early claim sent with the start
// script (early.go) belongs to the execution until a try holds the node key
// under it; releaseEarly is the one place that lets it go.
type execution struct {
	w   *Worker
	log *slog.Logger
	run string
	ri  *runInfo
	n   *spec.Node
	// taskID, retried (failed attempts of the task, asynq's count) and
	// maxRetry are the task's; attempt adds the node's re-drives (what the
	// stage sees).
	taskID            string
	retried, maxRetry int
	attempt           int
	// parents are the parents' outputs, as the start script returned them.
	parents map[string]map[string]stages.Artifact
	early   *earlyClaim
}

// execute runs one task of a node. Its return value is for asynq: nil
// (finished or nothing to do), an error (retry), or SkipRetry (final).
func (w *Worker) execute(ctx context.Context, p payload) error {
	e := w.e
	ri, err := e.info(ctx, p.Run)
	if errors.Is(err, ErrNoRun) {
		return fmt.Errorf("%w: %v", asynq.SkipRetry, err)
	}
	if err != nil {
		return err
	}
	n, ok := ri.graph.Node(p.Node)
	if !ok {
		return fmt.Errorf("%w: run %s has no node %q", asynq.SkipRetry, p.Run, p.Node)
	}
	x := &execution{w: w, run: p.Run, ri: ri, n: n, log: e.log.With("run", p.Run, "node", n.ID, "stage", n.Stage)}
	x.retried, _ = asynq.GetRetryCount(ctx)
	x.maxRetry, _ = asynq.GetMaxRetry(ctx)
	x.taskID, _ = asynq.GetTaskID(ctx)
	x.early = w.early(ri, p.Run, n, p)
	defer x.releaseEarly()
	mark, claim := w.startArgs(ctx, x.early, n, x.retried, x.taskID)
	state, redrives, parents, err := e.start(ctx, p.Run, n, mark, claim)
	if err != nil {
		return err
	}
	switch state {
	case Running:
	case Done, Cached:
		// A repeat of a finished node: make sure its children were enqueued.
		x.releaseEarly()
		return e.complete(ctx, p.Run, ri, n, state, nil)
	default:
		return nil // the run is over; startScript cancelled the node
	}
	x.parents, x.attempt = parents, x.retried+redrives
	x.log.Debug("node attempt starting", "task", x.taskID, "worker", w.opts.Name, "attempt", x.attempt)
	return x.tries(ctx)
}

// releaseEarly lets the early claim go, if the execution still has it.
func (x *execution) releaseEarly() {
	x.w.release(x.early)
	x.early = nil
}

// takeEarly hands the early claim to a try that computes node key key, or
// releases it when the claim is for another key: the task's hint and the
// recorded outputs disagree, and the recorded ones count.
func (x *execution) takeEarly(key string) *earlyClaim {
	if x.early != nil && x.early.key != key {
		x.releaseEarly()
	}
	c := x.early
	x.early = nil
	return c
}

// tries tries the node until it is committed or cached, or fails. An
// unreachable store or Redis is waited out with back-off (1 s doubling,
// capped at maxOutageBackoff) for OutagePatience: the try starts over (a
// resumable stage from its checkpoint) without spending an attempt.
func (x *execution) tries(ctx context.Context) error {
	w, e, log := x.w, x.w.e, x.log
	var outage time.Time
	backoff := time.Second
	for {
		outputs, key, final, err := x.try(ctx)
		if err == nil {
			if !outage.IsZero() {
				log.Info("store and Redis reachable again; node finished", "waited", time.Since(outage).Round(time.Second))
			}
			outJSON, _ := json.Marshal(outputs)
			log.Debug("node finished", "state", final, "key", Short(key))
			// The outputs are committed: recording that in Redis waits out
			// an outage too (it is idempotent).
			return w.patiently(ctx, log, func() error {
				return e.completeKey(ctx, x.run, x.ri, x.n, final, outJSON, key)
			})
		}
		if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			// Shut down or interrupted by a cancel: not the stage's fault.
			// asynq hands the task back (shutdown) or the run is over.
			return err
		}
		if errors.Is(err, errKeyTaken) {
			// Another execution took the node key over (this one was
			// presumed dead): wait for its result instead.
			continue
		}
		if d := (*stages.DamagedInputError)(nil); errors.As(err, &d) {
			return x.repair(ctx, d)
		}
		if !storage.IsTransient(err) || stages.IsPermanent(err) {
			return x.fail(ctx, err)
		}
		if outage.IsZero() {
			outage = time.Now()
			log.Warn("store or Redis unreachable; waiting, without spending an attempt", "patience", w.opts.OutagePatience, "err", err)
		}
		if time.Since(outage) > w.opts.OutagePatience {
			return x.fail(ctx, fmt.Errorf("%w %s: %w", errGaveUp, w.opts.OutagePatience, err))
		}
		log.Debug("still unreachable", "err", err, "next try in", backoff)
		if !waitBackoff(ctx, &backoff) {
			return err
		}
	}
}

// fail records a failed attempt: asynq retries it unless it was the last
// one or the error is permanent, in which case the node and the run fail.
// x.retried is asynq's count of failed attempts of this task: re-runs after
// a worker died are not counted against the node.
func (x *execution) fail(ctx context.Context, cause error) error {
	e, n := x.w.e, x.n
	k := runKeys(e.ns, x.run)
	// Record the error even with a cancelled ctx (shutdown races).
	bg := context.WithoutCancel(ctx)
	e.rdb.HSet(bg, k.node(n.ID), "error", cause.Error(), "finished_at", nowString())
	if !stages.IsPermanent(cause) && x.retried < x.maxRetry {
		return cause
	}
	msg := fmt.Sprintf("node %s: %v", n.ID, cause)
	if !stages.IsPermanent(cause) {
		msg = fmt.Sprintf("node %s failed after %d attempts: %v", n.ID, x.retried+1, cause)
	}
	failedRun, err := failScript.Run(bg, e.rdb, []string{k.states(), k.meta()}, n.ID, nowString(), msg).Int()
	if err != nil {
		return fmt.Errorf("failing node: %w (cause: %v)", err, cause)
	}
	if failedRun == 1 {
		e.log.Error("run failed", "run", x.run, "node", n.ID, "err", cause)
		if err := e.finishRun(bg, x.run); err != nil {
			e.log.Warn("writing run manifest", "run", x.run, "err", err)
		}
	}
	return fmt.Errorf("%w: %v", asynq.SkipRetry, cause)
}

// trial is what one try of the node computes under: its inputs and node
// key, when it started, and how it tells Redis who runs the node.
type trial struct {
	key     string
	inputs  map[string][]stages.Artifact
	started time.Time
	// mark records who runs the node, with the try's first Redis call
	// (nil: the start script recorded it with the early claim).
	mark func(redis.Pipeliner)
	// early is the early claim, when it is for this key: the claim to run
	// under.
	early *earlyClaim
}

// try is one try of the node: gather its inputs, compute its key, find it
// in the cache or execute it under the key's claim.
func (x *execution) try(ctx context.Context) (map[string]stages.Artifact, string, string, error) {
	inputs, err := resolveInputs(x.ri, x.n, x.parents)
	if err == nil {
		err = validateInputs(inputs)
	}
	if err != nil {
		return nil, "", "", err
	}
	t := trial{key: NodeKey(x.n, inputs), inputs: inputs, started: time.Now().UTC()}
	// Who executes the node, for status and the reconciler; sent with the
	// first Redis call of the try rather than in a round trip of its own.
	t.mark = func(p redis.Pipeliner) {
		p.HSet(ctx, runKeys(x.w.e.ns, x.run).node(x.n.ID), append(x.w.markFields(t.key, t.started, x.n, x.taskID), "attempt", x.attempt)...)
	}
	if t.early = x.takeEarly(t.key); t.early != nil {
		t.mark = nil // the start script recorded it
		t.started = t.early.started
	}
	outputs, final, err := x.compute(ctx, t)
	return outputs, t.key, final, err
}

// compute finds the node's outputs in the cache or executes its stage and
// commits them, as try t.
func (x *execution) compute(ctx context.Context, t trial) (map[string]stages.Artifact, string, error) {
	w, e, log, n := x.w, x.w.e, x.log, x.n
	key, inputs, started, mark, early := t.key, t.inputs, t.started, t.mark, t.early
	var lease *keyLease
	if gen := early.generation(); gen > 0 {
		// The cache is looked up under the claim below.
		lease = w.holdKey(log, key, early.token, gen)
	} else {
		rec, err := e.cachedRecord(ctx, key)
		if err == nil {
			if mark != nil {
				if _, err := e.rdb.Pipelined(ctx, func(p redis.Pipeliner) error { mark(p); return nil }); err != nil {
					return nil, "", err
				}
			}
			return rec.Outputs, Cached, nil
		}
		if !isCacheMiss(err) {
			return nil, "", fmt.Errorf("looking up cache: %w", err)
		}
		// Not in the cache: claim the key, or wait for whoever computes
		// it. The token names this execution (for status); an early claim's
		// is kept, in case its reply was lost but not the claim.
		token := w.token(x.run, n)
		if early != nil {
			token = early.token
		}
		lease, err = w.acquireKey(ctx, log, key, token, mark, func(holder string) {
			_ = e.rdb.HSet(ctx, runKeys(e.ns, x.run).node(n.ID), "waiting_for", holder).Err()
		})
		if errors.Is(err, errCommitted) {
			if rec, err := e.cachedRecord(ctx, key); err == nil {
				return rec.Outputs, Cached, nil
			}
			// The other execution's record is damaged: compute it here.
			lease, err = w.acquireKey(ctx, log, key, token, nil, nil)
		}
		if err != nil {
			return nil, "", err
		}
	}
	// Released in the background: whoever waits for the key looks for the
	// record too, and the node's completion need not wait for Redis.
	defer lease.stopAsync()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-lease.lost:
			cancel()
		case <-ctx.Done():
		}
	}()
	// Checked (again) under the claim: the holder we waited for may have
	// committed just before it let go.
	rec, err := e.cachedRecord(ctx, key)
	switch {
	case err == nil:
		return rec.Outputs, Cached, nil
	case isDamagedRecord(err):
		// A damaged record is a cache miss: executing again rewrites it.
		log.Warn("ignoring damaged node record", "key", Short(key), "err", err)
	case !errors.Is(err, storage.ErrNotFound):
		return nil, "", fmt.Errorf("looking up cache: %w", err)
	}
	st, ok := stages.Lookup(n.Stage)
	if !ok {
		return nil, "", stages.Permanent(fmt.Errorf("stage %s is not registered in this worker (%s)", n.Stage, w.opts.Name))
	}
	if st.Version != n.Version {
		return nil, "", stages.Permanent(fmt.Errorf("stage %s is version %d in this worker, the run wants %d", n.Stage, st.Version, n.Version))
	}
	params, err := st.ParamsFromCanonical(n.Params)
	if err != nil {
		return nil, "", stages.Permanent(err)
	}
	out := newOutputStore(e.store, layout.AttemptOutputs(key, stages.NewAttemptID()))
	defer out.batch.Close()
	// The node record holds the outputs' manifests: each is stored once,
	// there, and not beside its files too.
	outputs, err := stages.Exec(ctx, st, stages.Env{
		Store: out, Run: x.run, Node: n.ID, Key: key, Params: params, Inputs: inputs,
		OutputPrefixOf: out.outputPrefix, RecordsManifests: true,
		CheckpointPrefix: layout.Checkpoints(key),
		Device:           w.opts.Device, Attempt: x.attempt, Log: log, TempDir: w.opts.TempDir,
		Progress: w.progressWriter(x.run, n.ID),
	})
	lost := false
	select {
	case <-lease.lost:
		lost = true
	default:
		if err != nil && ctx.Err() != nil {
			// Interrupted: asynq gave the task up (its own lease lapsed
			// while this worker was stopped) or the worker shuts down.
			// Whether another execution took the node over meanwhile is
			// asked now rather than left to the next renewal, which the
			// release may pre-empt.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			lost = errors.Is(w.renew(rctx, lease), errKeyTaken)
			cancel()
		}
	}
	if lost {
		log.Warn("late: another execution claimed the node key while this one was presumed dead; its outputs count, this attempt's are discarded",
			"key", Short(key), "generation", lease.gen)
		x.discard(outputs)
		return nil, "", errKeyTaken
	}
	if err != nil {
		return nil, "", err
	}
	rec = &NodeRecord{Key: key, Stage: n.Stage, Version: n.Version, Params: n.Params, Inputs: map[string][]string{},
		Outputs: outputs, Run: x.run, Node: n.ID, Started: started, Finished: time.Now().UTC()}
	for port, arts := range inputs {
		for _, a := range arts {
			rec.Inputs[port] = append(rec.Inputs[port], a.Digest)
		}
	}
	if err := out.batch.Flush(ctx); err != nil {
		return nil, "", fmt.Errorf("committing outputs: %w", err)
	}
	published, final, err := x.commit(ctx, lease, rec)
	if err != nil {
		return nil, "", err
	}
	if st.Resumable && final == Done {
		if err := stages.DropCheckpoints(ctx, e.store, layout.Checkpoints(key)); err != nil {
			log.Warn("dropping checkpoints", "err", err)
		}
	}
	return published, final, nil
}

// commit publishes rec, the node record: the commit point of the cache,
// written last, once the outputs are durable. It is fenced (see lock.go):
// the claim must still be this execution's, and the record is created only
// where none is, so that exactly one execution's outputs are published.
// It returns the outputs published, and Done, or Cached when another
// execution's outputs were there first (this one's are discarded).
func (x *execution) commit(ctx context.Context, lease *keyLease, rec *NodeRecord) (map[string]stages.Artifact, string, error) {
	w, e, log := x.w, x.w.e, x.log
	// Redis away: the outputs are kept and the fence waited for, as long
	// as an outage is waited out anywhere.
	if err := w.patiently(ctx, log, func() error { return w.fence(ctx, lease) }); err != nil {
		select {
		case <-lease.lost:
			// The renewal learnt it first (and cancelled the wait).
			if !errors.Is(err, errKeyTaken) {
				err = fmt.Errorf("%w (%v)", errKeyTaken, err)
			}
		default:
		}
		if errors.Is(err, errKeyTaken) {
			log.Warn("late commit refused: another execution claimed the node key while this one was presumed dead; its outputs count, this attempt's are discarded",
				"key", Short(rec.Key), "err", err)
		}
		// Unpublished, these outputs are nobody's: a later try writes
		// its own.
		x.discard(rec.Outputs)
		return nil, "", fmt.Errorf("committing outputs: %w", err)
	}
	for range 3 {
		err := e.commitRecord(ctx, rec)
		if err == nil {
			return rec.Outputs, Done, nil
		}
		if !errors.Is(err, storage.ErrExists) {
			return nil, "", fmt.Errorf("committing outputs: %w", err)
		}
		// A record is there although this execution holds the claim: one
		// written by an execution whose commit was delayed past its fence,
		// or a damaged one this execution is to replace.
		other, err := e.cachedRecord(ctx, rec.Key)
		if err == nil {
			log.Warn("another execution committed this node key first; its outputs count, this attempt's are discarded",
				"key", Short(rec.Key), "its_run", other.Run, "its_node", other.Node)
			x.discard(rec.Outputs)
			return other.Outputs, Cached, nil
		}
		if !isCacheMiss(err) {
			return nil, "", fmt.Errorf("committing outputs: %w", err)
		}
		if err := e.store.Delete(ctx, layout.NodeRecord(rec.Key)); err != nil {
			return nil, "", fmt.Errorf("replacing a damaged node record: %w", err)
		}
	}
	return nil, "", fmt.Errorf("committing outputs: the record of %s keeps changing", Short(rec.Key))
}

// discard deletes the files of outputs that were not published: nothing
// refers to them, and they must not be mistaken for another execution's.
func (x *execution) discard(outputs map[string]stages.Artifact) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, a := range outputs {
		for _, f := range a.Files {
			if f.Shared() {
				continue // other artifacts may hold it; gc collects it once none does
			}
			if err := x.w.e.store.Delete(ctx, a.Key(f.Name)); err != nil {
				x.log.Warn("deleting a discarded output", "file", a.Key(f.Name), "err", err)
			}
		}
	}
}
