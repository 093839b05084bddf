package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/storage"
	"github.com/nerflow/nerflow/storage/layout"
)

// RunStatus is a run's state: live from Redis, or from the run manifest in
// the store once Redis has forgotten it (embedded runs, expired state). The
// manifest is this struct plus the spec and graph.
type RunStatus struct {
	ID         string       `json:"id"`
	Name       string       `json:"name"`
	State      string       `json:"state"`
	Error      string       `json:"error,omitempty"`
	CreatedAt  time.Time    `json:"created_at"`
	FinishedAt *time.Time   `json:"finished_at,omitempty"`
	Nodes      []NodeStatus `json:"nodes"`
	// Source says where this status came from: "redis", "manifest", or
	// "store" (the node records of a run live in a process whose Redis
	// this engine cannot reach, see WithPrivateRedis).
	Source string `json:"source"`
	// Warnings say what could not be reached while reading it (a status
	// from the manifest because Redis is away, for instance).
	Warnings []string `json:"warnings,omitempty"`
}

// NodeStatus is one node's state.
type NodeStatus struct {
	ID         string                     `json:"id"`
	Stage      string                     `json:"stage"`
	Queue      string                     `json:"queue"`
	State      string                     `json:"state"`
	Key        string                     `json:"key,omitempty"`
	Attempt    int                        `json:"attempt,omitempty"`
	Worker     string                     `json:"worker,omitempty"`
	StartedAt  *time.Time                 `json:"started_at,omitempty"`
	FinishedAt *time.Time                 `json:"finished_at,omitempty"`
	Error      string                     `json:"error,omitempty"`
	Progress   *stages.ProgressUpdate     `json:"progress,omitempty"`
	Outputs    map[string]stages.Artifact `json:"outputs,omitempty"`
	// Lost is set on a running node whose worker stopped beating: it is
	// waiting to be re-run by another worker.
	Lost bool `json:"lost,omitempty"`
	// WaitingFor names the execution (RUN/NODE@WORKER) computing the same
	// node key, which this node waits for instead of computing it too.
	WaitingFor string `json:"waiting_for,omitempty"`
}

// Display is the node's state as shown to people: its state, or what a
// running node is actually doing.
func (n NodeStatus) Display() string {
	switch {
	case n.State == Running && n.Lost:
		return "worker lost, waiting to be re-run"
	case n.State == Running && n.WaitingFor != "":
		return "waiting for " + n.WaitingFor
	}
	return n.State
}

// Duration is how long the node ran (so far, if it is running).
// OutputNames returns the names of the node's outputs, sorted, so that
// listings and error messages are stable.
func (n NodeStatus) OutputNames() []string {
	names := make([]string, 0, len(n.Outputs))
	for name := range n.Outputs {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func (n NodeStatus) Duration() time.Duration {
	if n.StartedAt == nil {
		return 0
	}
	end := time.Now()
	if n.FinishedAt != nil && Finished(n.State) {
		end = *n.FinishedAt
	}
	if end.Before(*n.StartedAt) {
		return 0
	}
	return end.Sub(*n.StartedAt)
}

// Node returns the status of node id.
func (r *RunStatus) Node(id string) (*NodeStatus, bool) {
	for i := range r.Nodes {
		if r.Nodes[i].ID == id {
			return &r.Nodes[i], true
		}
	}
	return nil, false
}

// Counts tallies nodes by state.
func (r *RunStatus) Counts() map[string]int {
	c := map[string]int{}
	for _, n := range r.Nodes {
		c[n.State]++
	}
	return c
}

// RunManifest is what the store keeps for a run (layout.RunManifest): its
// status when last written (at submit, retry and its end), with the spec,
// graph and datasets it is rebuilt from.
type RunManifest struct {
	RunStatus
	Spec      string                     `json:"spec,omitempty"`
	SpecFile  string                     `json:"spec_file,omitempty"`
	Overrides []string                   `json:"overrides,omitempty"`
	Graph     *spec.Graph                `json:"graph"`
	Datasets  map[string]stages.Artifact `json:"datasets,omitempty"`
}

// Status returns the state of run id, from Redis when it is there and from
// the run manifest otherwise. A live run that Redis lost is restored from
// the store first. When Redis cannot be reached it degrades to the manifest
// and says so in Warnings, rather than failing.
func (e *Engine) Status(ctx context.Context, id string) (*RunStatus, error) {
	st, err := e.liveStatus(ctx, id)
	if errors.Is(err, ErrNoRun) {
		m, merr := e.RunManifest(ctx, id)
		if merr != nil {
			return nil, merr
		}
		if m.State == Running && m.Graph != nil && e.privateRedis {
			return e.storeStatus(ctx, m)
		}
		if m.State == Running && m.Graph != nil {
			if rerr := e.restore(ctx, m); rerr == nil {
				return e.liveStatus(ctx, id)
			} else {
				e.log.Warn("restoring run", "run", id, "err", rerr)
			}
		}
		st := m.RunStatus
		st.Source = "manifest"
		return &st, nil
	}
	if err != nil && storage.IsTransient(err) {
		m, merr := e.RunManifest(ctx, id)
		if merr != nil {
			return nil, fmt.Errorf("%w; and the store: %v", err, merr)
		}
		st := m.RunStatus
		st.Source = "manifest"
		st.Warnings = append(st.Warnings, fmt.Sprintf("cannot reach Redis (%v): this is the run manifest, written %s", err, manifestWhen(m)))
		return &st, nil
	}
	return st, err
}

// storeStatus is the status of the live run of manifest m as the store
// records it (the node records of its finished nodes), for an engine whose
// private Redis cannot see the process that runs it (WithPrivateRedis).
func (e *Engine) storeStatus(ctx context.Context, m *RunManifest) (*RunStatus, error) {
	ri := &runInfo{graph: m.Graph, datasets: m.Datasets}
	nodes, err := e.rebuildNodes(ctx, m, ri)
	if err != nil {
		return nil, fmt.Errorf("reading run %s from the store: %w", m.ID, err)
	}
	st := &RunStatus{ID: m.ID, Name: m.Name, State: Running, CreatedAt: m.CreatedAt, Source: "store",
		Warnings: []string{"the run is live in another process, whose Redis this one cannot reach (an embedded run " +
			"keeps its state in its own process): finished nodes are shown as the store records them, and the " +
			"nodes that may run next as queued"}}
	finished := 0
	for _, n := range m.Graph.Nodes {
		ns := nodes[n.ID]
		ns.ID, ns.Stage, ns.Queue = n.ID, n.Stage, n.Queue
		st.Nodes = append(st.Nodes, ns)
		if ns.State == Done || ns.State == Cached {
			finished++
		}
	}
	// Every node committed: the run succeeded, its manifest not yet
	// rewritten (restore reads it so too).
	if finished == len(st.Nodes) {
		st.State, st.Warnings = Succeeded, nil
	}
	return st, nil
}

func manifestWhen(m *RunManifest) string {
	if m.FinishedAt != nil {
		return "when the run ended"
	}
	return "when the run was submitted; nodes finished since are not shown"
}

func (e *Engine) liveStatus(ctx context.Context, id string) (*RunStatus, error) {
	k := runKeys(e.ns, id)
	meta, err := e.rdb.HMGet(ctx, k.meta(), "name", "state", "error", "created_at", "finished_at").Result()
	if err != nil {
		return nil, fmt.Errorf("reading run %s: %w", id, err)
	}
	if meta[1] == nil {
		return nil, fmt.Errorf("run %s: %w", id, ErrNoRun)
	}
	ri, err := e.info(ctx, id)
	if err != nil {
		return nil, err
	}
	str := func(v any) string { s, _ := v.(string); return s }
	st := &RunStatus{ID: id, Name: str(meta[0]), State: str(meta[1]), Error: str(meta[2]), Source: "redis"}
	st.CreatedAt, _ = time.Parse(time.RFC3339Nano, str(meta[3]))
	st.FinishedAt = parseTime(str(meta[4]))
	states, err := e.rdb.HGetAll(ctx, k.states()).Result()
	if err != nil {
		return nil, fmt.Errorf("reading run %s: %w", id, err)
	}
	cmds := make([]*redis.MapStringStringCmd, len(ri.graph.Nodes))
	_, err = e.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, n := range ri.graph.Nodes {
			cmds[i] = p.HGetAll(ctx, k.node(n.ID))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading run %s: %w", id, err)
	}
	var l *liveness
	for i, n := range ri.graph.Nodes {
		h := cmds[i].Val()
		ns := NodeStatus{ID: n.ID, Stage: n.Stage, Queue: n.Queue, State: states[n.ID], Key: h["key"],
			Attempt: atoi(h["attempt"]), Worker: h["worker"], Error: h["error"], WaitingFor: h["waiting_for"],
			StartedAt: parseTime(h["started_at"]), FinishedAt: parseTime(h["finished_at"])}
		if ns.State == Running {
			if l == nil {
				if l, err = e.liveness(); err != nil {
					st.Warnings = append(st.Warnings, err.Error())
					l = &liveness{}
				}
			}
			ns.Lost = l.now.After(time.Time{}) && e.lost(l, n.Queue, h)
		}
		if p := h["progress"]; p != "" {
			var pu stages.ProgressUpdate
			if json.Unmarshal([]byte(p), &pu) == nil {
				ns.Progress = &pu
			}
		}
		if o := h["outputs"]; o != "" {
			_ = json.Unmarshal([]byte(o), &ns.Outputs)
		}
		st.Nodes = append(st.Nodes, ns)
	}
	return st, nil
}

func parseTime(s string) *time.Time {
	if s == "" {
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return nil
	}
	return &t
}

// RunManifest reads run id's manifest from the store.
func (e *Engine) RunManifest(ctx context.Context, id string) (*RunManifest, error) {
	rc, _, err := e.store.Get(ctx, layout.RunManifest(id))
	if errors.Is(err, storage.ErrNotFound) {
		return nil, fmt.Errorf("run %s: %w", id, ErrNoRun)
	}
	if err != nil {
		return nil, fmt.Errorf("reading manifest of run %s: %w", id, err)
	}
	defer rc.Close()
	var m RunManifest
	if err := json.NewDecoder(rc).Decode(&m); err != nil {
		return nil, fmt.Errorf("reading manifest of run %s: %w", id, err)
	}
	return &m, nil
}

// RunSummary is one line of Runs.
type RunSummary struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	State      string     `json:"state"`
	CreatedAt  time.Time  `json:"created_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	Source     string     `json:"source"`
}

// RunIDsSince returns the ids of the runs Redis knows that were created at
// or after since, oldest first, without reading the store (Runs also lists
// the manifests of runs Redis has forgotten). It is what a metrics exporter
// polls.
func (e *Engine) RunIDsSince(ctx context.Context, since time.Time) ([]string, error) {
	ids, err := e.rdb.ZRangeByScore(ctx, runsIndex(e.ns), &redis.ZRangeBy{
		Min: strconv.FormatInt(since.UnixMilli(), 10), Max: "+inf"}).Result()
	if err != nil {
		return nil, fmt.Errorf("listing runs: %w", err)
	}
	return ids, nil
}

// Runs lists the runs Redis knows and those with a manifest in the store,
// newest first.
func (e *Engine) Runs(ctx context.Context, limit int) ([]RunSummary, error) {
	seen := map[string]bool{}
	var out []RunSummary
	ids, err := e.rdb.ZRevRange(ctx, runsIndex(e.ns), 0, -1).Result()
	if err != nil && !storage.IsTransient(err) {
		return nil, fmt.Errorf("listing runs: %w", err)
	}
	if err != nil {
		// Redis is away: the manifests still list every run, with the
		// state they had when last written.
		e.log.Warn("cannot reach Redis; listing runs from their manifests", "err", err)
	}
	for _, id := range ids {
		v, err := e.rdb.HMGet(ctx, runKeys(e.ns, id).meta(), "name", "state", "created_at", "finished_at").Result()
		if err != nil || v[1] == nil {
			continue
		}
		s := func(i int) string { x, _ := v[i].(string); return x }
		created, _ := time.Parse(time.RFC3339Nano, s(2))
		out = append(out, RunSummary{ID: id, Name: s(0), State: s(1), CreatedAt: created, FinishedAt: parseTime(s(3)), Source: "redis"})
		seen[id] = true
	}
	objs, err := e.store.List(ctx, layout.Runs)
	if err != nil {
		return nil, fmt.Errorf("listing run manifests: %w", err)
	}
	for _, o := range objs {
		id, ok := layout.RunOfManifest(o.Key)
		if !ok || seen[id] {
			continue
		}
		m, err := e.RunManifest(ctx, id)
		if err != nil {
			continue
		}
		out = append(out, RunSummary{ID: id, Name: m.Name, State: m.State, CreatedAt: m.CreatedAt, FinishedAt: m.FinishedAt, Source: "manifest"})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.After(out[j].CreatedAt) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Wait polls run id every interval until it is over, calling fn (if not
// nil) with each status; it returns the final status.
func (e *Engine) Wait(ctx context.Context, id string, interval time.Duration, fn func(*RunStatus)) (*RunStatus, error) {
	t := time.NewTicker(interval)
	defer t.Stop()
	var last *RunStatus
	for {
		if fn == nil {
			// Only the run's state: reading every node each poll costs a
			// round of HGETALLs per node.
			state, err := e.rdb.HGet(ctx, runKeys(e.ns, id).meta(), "state").Result()
			switch {
			case err != nil && storage.IsTransient(err):
				// Redis is away: keep waiting for it.
			case err != nil && !errors.Is(err, redis.Nil):
				return nil, fmt.Errorf("reading run %s: %w", id, err)
			case state != Running:
				st, err := e.Status(ctx, id)
				if err != nil || st.State != Running {
					return st, err
				}
			}
		} else {
			st, err := e.Status(ctx, id)
			if err != nil && !storage.IsTransient(err) {
				return nil, err
			}
			if err != nil {
				st = &RunStatus{ID: id, State: Running, Warnings: []string{err.Error()}}
			}
			fn(st)
			if st.State != Running {
				return st, nil
			}
			last = st
		}
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-t.C:
		}
	}
}
