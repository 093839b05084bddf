package engine

import (
	"context"
	"encoding/json"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/stages"
)

// The early claim. A node's key is made of its parents' outputs, which the
// start script returns; claiming the key then takes a round trip of its
// own. But a node without parents, or one released by its only parent
// (which puts its outputs in the task, see payload.Parents), has its key
// before the first round trip: the claim then travels in the start
// script's pipeline, and the script records who runs the node. Most nodes
// of most DAGs are one or the other. The start script's answer still
// decides: a node that is not to run, or whose parents' recorded outputs
// give another key, lets the early claim go and takes the usual path.

// maxParentsHint bounds the outputs (JSON) a task carries for its node's
// early claim: a few manifests, not those of an output of thousands of
// files.
const maxParentsHint = 16 << 10

// earlyClaim is a claim on a node key sent with the start script.
type earlyClaim struct {
	key, token string
	started    time.Time
	cmd        *redis.Cmd // claimScript's, in the start script's pipeline
}

// early returns the early claim of node n from the parents' outputs in
// the task, or nil when the task does not carry them all.
func (w *Worker) early(ri *runInfo, run string, n *spec.Node, p payload) *earlyClaim {
	if len(p.Parents) != len(n.Parents) {
		return nil
	}
	outs := make(map[string]map[string]stages.Artifact, len(n.Parents))
	for _, id := range n.Parents {
		var o map[string]stages.Artifact
		if err := json.Unmarshal(p.Parents[id], &o); err != nil {
			return nil
		}
		outs[id] = o
	}
	inputs, err := resolveInputs(ri, n, outs)
	if err != nil || validateInputs(inputs) != nil {
		return nil // the usual path reports it
	}
	return &earlyClaim{key: NodeKey(n, inputs), token: w.token(run, n), started: time.Now().UTC()}
}

// token names one execution of node n (for status); unique to it.
func (w *Worker) token(run string, n *spec.Node) string {
	return run + "/" + n.ID + "@" + w.opts.Name + "#" + stages.NewAttemptID()
}

// markFields are the fields of a node's hash that say who executes it, for
// status and the reconciler, less the attempt.
func (w *Worker) markFields(key string, started time.Time, n *spec.Node, taskID string) []any {
	return []any{"key", key, "started_at", started.Format(time.RFC3339Nano), "worker", w.opts.Name, "queue", n.Queue,
		"host", w.host, "pid", os.Getpid(), "task", taskID, "waiting_for", ""}
}

// startArgs are the start script's optional arguments and the commands
// pipelined with it for claim c (none for nil).
func (w *Worker) startArgs(ctx context.Context, c *earlyClaim, n *spec.Node, retried int, taskID string) ([]any, func(redis.Pipeliner)) {
	if c == nil {
		return nil, nil
	}
	mark := append([]any{retried}, w.markFields(c.key, c.started, n, taskID)...)
	return mark, func(p redis.Pipeliner) {
		c.cmd = claimScript.EvalSha(ctx, p, []string{runKeys(w.e.ns, "").keyLock(c.key)},
			c.token, w.opts.NodeLease.Milliseconds(), keyClaimKeep.Milliseconds())
	}
}

// generation is the generation of c's claim on its key, 0 when c does not
// hold it (the script was not loaded, or another execution holds the key).
func (c *earlyClaim) generation() int64 {
	if c == nil || c.cmd == nil {
		return 0
	}
	res, err := c.cmd.Slice()
	if err != nil {
		return 0
	}
	gen, _, err := claimResult(res)
	if err != nil {
		return 0
	}
	return gen
}

// release lets the key go, in the background, if c holds it.
func (w *Worker) release(c *earlyClaim) {
	if c.generation() == 0 {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = keyReleaseScript.Run(ctx, w.e.rdb, []string{runKeys(w.e.ns, "").keyLock(c.key)}, c.token).Err()
	}()
}
