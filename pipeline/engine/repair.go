package engine

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/storage/artifact"
	"github.com/nerflow/nerflow/storage/layout"
)

// Damaged artifacts. A node's outputs can be damaged after the node
// committed them: a file deleted, restored from an older backup, edited by
// hand, or rotted on a disk. What the store's metadata shows (a file gone,
// or stored with another size or digest than the node record lists) makes
// the record a cache miss (cachedRecord). Bytes that changed under an
// intact recorded digest show only when read: the stage that reads them
// fails with a stages.DamagedInputError. The worker then checks the file
// itself, undoes the completion of the parent that produced it
// (reopenScript), deletes the cache entry that names the damaged copy and
// enqueues the parent: it executes again (it is no cache hit any more), and
// the child runs once the parent completed, on the new copy. The child spends no attempt; it may do
// this maxRepairs times, so that a disk that damages every copy fails the
// run instead of looping.

// maxRepairs bounds how often one node has its inputs made again.
const maxRepairs = 3

// repair handles a try of the node that read the damaged input d: it has
// d's producer executed again, and the node after it. Its result is for
// asynq, like execute's.
func (x *execution) repair(ctx context.Context, d *stages.DamagedInputError) error {
	w, e, log, run, n, fail := x.w, x.w.e, x.log, x.run, x.n, func(err error) error { return x.fail(ctx, err) }
	parent := producerOf(x.ri, n, x.parents, d.Artifact)
	if parent == nil {
		// An imported dataset: nothing in the run can make it again.
		log.Error("input artifact damaged; it is no output of a parent that could make it again", "err", d)
		return fail(stages.Permanent(d))
	}
	// The reader's word is checked before a cache entry is dropped: a
	// file read again whole, its bytes against the manifest's digest.
	if err := artifact.VerifyFile(ctx, e.store, d.Artifact, d.File); err == nil {
		return fail(fmt.Errorf("input read as damaged, but intact when checked again: %w", d))
	} else if !stages.IsDamage(err) {
		return fmt.Errorf("checking damaged input %s: %w", d.Artifact.Prefix, err)
	}
	k := runKeys(e.ns, run)
	keys := []string{k.states(), k.waiting(), k.meta(), k.node(parent.ID), k.node(n.ID)}
	argv := append([]any{parent.ID, n.ID, d.Artifact.Prefix, maxRepairs}, anyStrings(parent.Children)...)
	res, err := reopenScript.Run(ctx, e.rdb, keys, argv...).Int64Slice()
	if err != nil || len(res) != 2 {
		return fmt.Errorf("reopening node %s after damage to its output: %v (%w)", parent.ID, res, err)
	}
	switch res[0] {
	case 0:
		return nil // the run is over, or the node is no longer this task's
	case -1:
		return fail(stages.Permanent(fmt.Errorf("inputs made again %d times and damaged each time: %w", maxRepairs, d)))
	case 2:
		log.Warn("input damaged, and its producer has made it again since; starting over", "parent", parent.ID, "err", d)
		return w.patiently(ctx, log, func() error {
			return e.enqueueAs(context.WithoutCancel(ctx), run, n, taskID(run, n.ID)+"~r"+strconv.FormatInt(res[1], 10), 0, nil)
		})
	}
	log.Warn("input damaged; executing its producer again, then this node", "parent", parent.ID, "err", d)
	if res[1] == 0 {
		return nil // another child reopened the parent first, and does the rest
	}
	// The cache entry goes before the parent is enqueued, so that its
	// execution cannot commit a new record first that this would delete.
	// The parent is enqueued whatever happens here: it is queued now, and
	// nothing else would enqueue it. Should the damaged entry survive, the
	// parent finds it cached and the child meets the damage again, a
	// repair further towards maxRepairs.
	if err := w.patiently(ctx, log, func() error { return e.dropRecordOf(ctx, log, d.Artifact) }); err != nil {
		log.Error("dropping the cache entry of a damaged artifact", "artifact", d.Artifact.Prefix, "err", err)
	}
	return w.patiently(ctx, log, func() error {
		return e.enqueueAs(context.WithoutCancel(ctx), run, parent, taskID(run, parent.ID)+"~r"+strconv.FormatInt(res[1], 10), 0, nil)
	})
}

// producerOf returns the parent of n whose recorded outputs include a, or
// nil when a came from elsewhere (a dataset).
func producerOf(ri *runInfo, n *spec.Node, parentOutputs map[string]map[string]stages.Artifact, a stages.Artifact) *spec.Node {
	for _, pid := range n.Parents {
		for _, o := range parentOutputs[pid] {
			if o.Prefix == a.Prefix && o.Digest == a.Digest {
				p, _ := ri.graph.Node(pid)
				return p
			}
		}
	}
	return nil
}

// dropRecordOf deletes the node record of a's producer if it still names
// a's damaged copy: the cache entry must not hand it out again.
func (e *Engine) dropRecordOf(ctx context.Context, log *slog.Logger, a stages.Artifact) error {
	dropped, err := e.dropRecordNaming(ctx, a.Producer.NodeKey, a.Prefix)
	if dropped {
		log.Warn("dropped the cache entry of a damaged artifact", "key", Short(a.Producer.NodeKey), "artifact", a.Prefix)
	}
	return err
}

// dropRecordNaming deletes the record of node key if one of its outputs is
// at prefix. A record made again since (another copy) is left alone; one
// that is re-written between the check and the delete is lost, which costs
// an execution, not a wrong result.
func (e *Engine) dropRecordNaming(ctx context.Context, key, prefix string) (bool, error) {
	if key == "" {
		return false, nil
	}
	rec, err := e.NodeRecord(ctx, key)
	switch {
	case isCacheMiss(err):
		return false, nil // no entry to hand the copy out
	case err != nil:
		return false, fmt.Errorf("reading the record of damaged artifact %s: %w", prefix, err)
	}
	for _, o := range rec.Outputs {
		if o.Prefix == prefix {
			if err := e.store.Delete(ctx, layout.NodeRecord(key)); err != nil {
				return false, fmt.Errorf("dropping the cache entry of damaged artifact %s: %w", prefix, err)
			}
			return true, nil
		}
	}
	return false, nil
}
