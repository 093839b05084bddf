package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/storage"
	"github.com/nerflow/nerflow/storage/layout"
)

// Controls: what changes a run from outside its workers (Cancel, Retry)
// and what records a run in the store when it ends or starts again. The
// state changes themselves are the Lua scripts of state.go.

// Cancel stops run id: nodes not started are cancelled and running ones are
// interrupted. Cancelling a finished run is an error.
func (e *Engine) Cancel(ctx context.Context, id, reason string) error {
	if err := e.ensureRun(ctx, id); err != nil {
		return err
	}
	ri, err := e.info(ctx, id)
	if err != nil {
		return err
	}
	k := runKeys(e.ns, id)
	if reason == "" {
		reason = "cancelled"
	}
	res, err := cancelScript.Run(ctx, e.rdb, []string{k.states(), k.meta()}, nowString(), reason).StringSlice()
	if errors.Is(err, redis.Nil) {
		state, _ := e.rdb.HGet(ctx, k.meta(), "state").Result()
		return fmt.Errorf("run %s is %s, not running", id, state)
	}
	if err != nil {
		return fmt.Errorf("cancelling run %s: %w", id, err)
	}
	for _, node := range res {
		if err := e.inspector.CancelProcessing(taskID(id, node)); err != nil {
			e.log.Warn("interrupting node", "run", id, "node", node, "err", err)
		}
	}
	// Tasks still queued would be no-ops; delete them to keep queues short.
	for _, n := range ri.graph.Nodes {
		_ = e.inspector.DeleteTask(e.queue(n.Queue), taskID(id, n.ID))
	}
	e.log.Info("run cancelled", "run", id, "interrupted", len(res))
	return e.finishRun(ctx, id)
}

// Retry re-runs the failed and cancelled nodes of a finished run; nodes
// that finished are kept, and re-run nodes whose outputs are cached are
// cached again. It returns the number of nodes set to run again.
func (e *Engine) Retry(ctx context.Context, id string) (int, error) {
	if err := e.ensureRun(ctx, id); err != nil {
		return 0, err
	}
	ri, err := e.info(ctx, id)
	if err != nil {
		return 0, err
	}
	k := runKeys(e.ns, id)
	// Tasks of a previous attempt stay in asynq (archived, or completed and
	// retained) under the ids the nodes will use again: remove them first,
	// or enqueuing a node again would look like a duplicate.
	states, err := e.rdb.HGetAll(ctx, k.states()).Result()
	if err != nil {
		return 0, fmt.Errorf("reading run %s: %w", id, err)
	}
	for _, n := range ri.graph.Nodes {
		if s := states[n.ID]; s != Failed && s != Cancelled {
			continue
		}
		if err := e.clearTask(ctx, id, n, 10*time.Second); err != nil {
			e.log.Warn("removing old task", "run", id, "node", n.ID, "err", err)
		}
	}
	// The graph, for the script: each node with its parents.
	argv := make([]any, 0, 3*len(ri.graph.Nodes))
	for _, n := range ri.graph.Nodes {
		argv = append(argv, n.ID, len(n.Parents))
		for _, p := range n.Parents {
			argv = append(argv, p)
		}
	}
	keys := append([]string{k.states(), k.waiting(), k.meta()}, k.nodeKeys(nodeIDs(ri.graph))...)
	res, err := retryScript.Run(ctx, e.rdb, keys, argv...).Slice()
	if err != nil {
		return 0, fmt.Errorf("retrying run %s: %w", id, err)
	}
	if outcome, _ := res[0].(string); outcome == "refused" && len(res) == 2 {
		return 0, fmt.Errorf("run %s is %v: nothing to retry", id, res[1])
	}
	if len(res) != 3 {
		return 0, fmt.Errorf("retrying run %s: unexpected reply %v", id, res)
	}
	again, _ := res[1].(int64)
	queued, _ := res[2].([]any)
	var ready []*spec.Node
	for _, r := range queued {
		if n, ok := ri.graph.Node(r.(string)); ok {
			ready = append(ready, n)
		}
	}
	if _, err := e.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, key := range k.all(nodeIDs(ri.graph)) {
			p.Persist(ctx, key)
		}
		return nil
	}); err != nil {
		return 0, fmt.Errorf("retrying run %s: %w", id, err)
	}
	if err := e.writeManifest(ctx, id); err != nil {
		return 0, fmt.Errorf("retrying run %s: writing manifest: %w", id, err)
	}
	if _, err := storage.PutBytes(ctx, e.store, layout.LiveMarker(id), []byte(id)); err != nil {
		return 0, fmt.Errorf("retrying run %s: %w", id, err)
	}
	for _, n := range ready {
		if err := e.enqueue(ctx, id, n); err != nil {
			return int(again), err
		}
	}
	e.log.Info("run retried", "run", id, "nodes", again)
	return int(again), nil
}

// finishRun records a run that just ended: its manifest in the store, and
// an expiry on its Redis state.
func (e *Engine) finishRun(ctx context.Context, id string) error {
	err := e.writeManifest(ctx, id)
	if err == nil {
		// Only once the manifest has the final state: the reconciler
		// finishes runs whose marker outlived them.
		err = e.store.Delete(ctx, layout.LiveMarker(id))
	}
	ri, ierr := e.info(ctx, id)
	if ierr != nil {
		return errors.Join(err, ierr)
	}
	k := runKeys(e.ns, id)
	_, perr := e.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, key := range k.all(nodeIDs(ri.graph)) {
			p.Expire(ctx, key, e.runTTL)
		}
		return nil
	})
	return errors.Join(err, perr)
}

func nodeIDs(g *spec.Graph) []string {
	ids := make([]string, len(g.Nodes))
	for i, n := range g.Nodes {
		ids[i] = n.ID
	}
	return ids
}

// writeManifest stores the run's current state as its manifest.
func (e *Engine) writeManifest(ctx context.Context, id string) error {
	st, err := e.liveStatus(ctx, id)
	if err != nil {
		return err
	}
	ri, err := e.info(ctx, id)
	if err != nil {
		return err
	}
	extra, err := e.rdb.HMGet(ctx, runKeys(e.ns, id).meta(), "spec", "spec_file", "overrides").Result()
	if err != nil {
		return err
	}
	m := RunManifest{RunStatus: *st, Graph: ri.graph, Datasets: ri.datasets}
	m.Source, m.Warnings = "", nil
	for i := range m.Nodes {
		m.Nodes[i].Lost, m.Nodes[i].WaitingFor = false, ""
	}
	m.Spec, _ = extra[0].(string)
	m.SpecFile, _ = extra[1].(string)
	if o, _ := extra[2].(string); o != "" {
		_ = json.Unmarshal([]byte(o), &m.Overrides)
	}
	_, err = storage.PutJSON(ctx, e.store, layout.RunManifest(id), m)
	return err
}
