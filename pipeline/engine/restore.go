package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/stages"
)

// Durable runs. Redis holds a run's live state, but everything needed to
// rebuild it is in the store: the run manifest (graph, datasets, and the
// final states once the run ended) and the node records, which are keyed by
// node key. A node key depends only on the graph, the datasets and the
// outputs of the node's parents, so walking the graph from its roots finds
// every node that was committed; the others are queued again. Failed
// attempts are not in the store: after a restore they are tried afresh.

func (k keys) restoring() string { return k.ns + ":{" + k.run + "}:restoring" }

// ensureRun makes sure Redis holds run id's state, restoring it from the
// store when Redis lost it. It returns ErrNoRun when neither knows the run.
func (e *Engine) ensureRun(ctx context.Context, id string) error {
	n, err := e.rdb.Exists(ctx, runKeys(e.ns, id).meta()).Result()
	if err != nil {
		return fmt.Errorf("reading run %s: %w", id, err)
	}
	if n == 1 {
		return nil
	}
	m, err := e.RunManifest(ctx, id)
	if err != nil {
		return err
	}
	if m.Graph == nil {
		return fmt.Errorf("run %s: manifest has no graph: %w", id, ErrNoRun)
	}
	if e.privateRedis && m.State == Running {
		return fmt.Errorf("run %s is live in another process, whose Redis this one cannot reach: "+
			"control it from that process (or run it on a cluster: --redis)", id)
	}
	return e.restore(ctx, m)
}

// restore writes the Redis state of the run of manifest m. One process
// restores a run at a time; the others wait for it.
func (e *Engine) restore(ctx context.Context, m *RunManifest) error {
	k := runKeys(e.ns, m.ID)
	token := nowString()
	ok, err := e.rdb.SetNX(ctx, k.restoring(), token, time.Minute).Result()
	if err != nil {
		return fmt.Errorf("restoring run %s: %w", m.ID, err)
	}
	if !ok {
		for range 600 {
			if n, err := e.rdb.Exists(ctx, k.meta()).Result(); err == nil && n == 1 {
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
		return fmt.Errorf("run %s: another process is restoring it", m.ID)
	}
	defer releaseScript.Run(context.WithoutCancel(ctx), e.rdb, []string{k.restoring()}, token)
	if n, err := e.rdb.Exists(ctx, k.meta()).Result(); err != nil || n == 1 {
		return err
	}
	ri := &runInfo{graph: m.Graph, datasets: m.Datasets}
	if ri.datasets == nil {
		ri.datasets = map[string]stages.Artifact{}
	}
	nodes, err := e.rebuildNodes(ctx, m, ri)
	if err != nil {
		return fmt.Errorf("restoring run %s: %w", m.ID, err)
	}
	states := map[string]any{}
	waiting := map[string]any{}
	unfinished := 0
	var ready []*spec.Node
	for _, n := range m.Graph.Nodes {
		ns := nodes[n.ID]
		states[n.ID] = ns.State
		left := 0
		for _, p := range n.Parents {
			if s := nodes[p].State; s != Done && s != Cached {
				left++
			}
		}
		waiting[n.ID] = left
		if ns.State != Done && ns.State != Cached {
			unfinished++
		}
		if ns.State == Queued {
			ready = append(ready, n)
		}
	}
	state := m.State
	if state == Running && unfinished == 0 {
		state = Succeeded
	}
	meta := map[string]any{
		"id": m.ID, "name": m.Name, "state": state, "created_at": m.CreatedAt.Format(time.RFC3339Nano),
		"graph": mustJSON(m.Graph), "datasets": mustJSON(ri.datasets), "unfinished": unfinished,
		"spec": m.Spec, "spec_file": m.SpecFile, "overrides": mustJSON(m.Overrides), "error": m.Error,
		"restored_at": nowString(),
	}
	if m.FinishedAt != nil {
		meta["finished_at"] = m.FinishedAt.Format(time.RFC3339Nano)
	}
	_, err = e.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, k.meta(), meta)
		p.HSet(ctx, k.states(), states)
		p.HSet(ctx, k.waiting(), waiting)
		for _, n := range m.Graph.Nodes {
			ns := nodes[n.ID]
			h := map[string]any{"queue": n.Queue}
			if ns.Key != "" {
				h["key"] = ns.Key
			}
			if ns.Outputs != nil {
				h["outputs"] = mustJSON(ns.Outputs)
			}
			if ns.StartedAt != nil {
				h["started_at"] = ns.StartedAt.Format(time.RFC3339Nano)
			}
			if ns.FinishedAt != nil {
				h["finished_at"] = ns.FinishedAt.Format(time.RFC3339Nano)
			}
			if ns.Error != "" {
				h["error"] = ns.Error
			}
			if ns.Worker != "" {
				h["worker"] = ns.Worker
			}
			if ns.Attempt > 0 {
				h["attempt"] = ns.Attempt
			}
			p.Del(ctx, k.node(n.ID))
			p.HSet(ctx, k.node(n.ID), h)
		}
		p.ZAdd(ctx, runsIndex(e.ns), redis.Z{Score: float64(m.CreatedAt.UnixMilli()), Member: m.ID})
		return nil
	})
	if err != nil {
		return fmt.Errorf("restoring run %s: %w", m.ID, err)
	}
	e.cacheInfo(m.ID, ri)
	e.log.Warn("run restored from the store after Redis lost it", "run", m.ID, "state", state,
		"finished_nodes", len(m.Graph.Nodes)-unfinished, "queued", len(ready))
	if state != Running {
		return e.finishRun(ctx, m.ID)
	}
	// A worker may still be executing a node that Redis forgot: it renews
	// its node-key lease within a third of the lease, and the task enqueued
	// here, delayed by restoreDelay, then waits for it instead of computing
	// the node a second time.
	for _, n := range ready {
		if err := e.enqueueAs(ctx, m.ID, n, taskID(m.ID, n.ID), e.restoreDelay, nil); err != nil {
			return err
		}
	}
	return nil
}

// rebuildNodes derives node states: from the manifest for a run that ended,
// from the node records in the store for a live one.
func (e *Engine) rebuildNodes(ctx context.Context, m *RunManifest, ri *runInfo) (map[string]NodeStatus, error) {
	out := map[string]NodeStatus{}
	if m.State != Running {
		for _, n := range m.Nodes {
			out[n.ID] = n
		}
		for _, n := range m.Graph.Nodes {
			if _, ok := out[n.ID]; !ok {
				out[n.ID] = NodeStatus{ID: n.ID, State: Cancelled}
			}
		}
		return out, nil
	}
	outputs := map[string]map[string]stages.Artifact{}
	// Graph nodes are in topological order (spec.Expand): parents first.
	for _, n := range m.Graph.Nodes {
		ns := NodeStatus{ID: n.ID, State: Pending}
		ready := true
		for _, p := range n.Parents {
			if _, ok := outputs[p]; !ok {
				ready = false
			}
		}
		if ready {
			ns.State = Queued
			inputs, err := resolveInputs(ri, n, outputs)
			if err != nil {
				return nil, err
			}
			key := NodeKey(n, inputs)
			rec, err := e.cachedRecord(ctx, key)
			switch {
			case err == nil:
				ns.State, ns.Key, ns.Outputs = Cached, key, rec.Outputs
				if rec.Run == m.ID {
					ns.State = Done
				}
				ns.StartedAt, ns.FinishedAt, ns.Worker = &rec.Started, &rec.Finished, "(restored)"
				outputs[n.ID] = rec.Outputs
			case isCacheMiss(err):
			default:
				return nil, fmt.Errorf("node %s: %w", n.ID, err)
			}
		}
		out[n.ID] = ns
	}
	return out, nil
}

// resolveInputs gathers the artifacts connected to n from its parents'
// outputs and the run's datasets.
func resolveInputs(ri *runInfo, n *spec.Node, parentOutputs map[string]map[string]stages.Artifact) (map[string][]stages.Artifact, error) {
	in := map[string][]stages.Artifact{}
	for _, i := range n.Inputs {
		if i.Dataset != "" {
			a, ok := ri.datasets[i.Dataset]
			if !ok {
				return nil, stages.Permanent(fmt.Errorf("dataset %s was not imported", i.Dataset))
			}
			in[i.Port] = append(in[i.Port], a)
			continue
		}
		a, ok := parentOutputs[i.Node][i.Output]
		if !ok {
			return nil, stages.Permanent(fmt.Errorf("node %s has no output %s", i.Node, i.Output))
		}
		in[i.Port] = append(in[i.Port], a)
	}
	return in, nil
}
