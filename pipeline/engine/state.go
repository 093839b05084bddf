package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/stages"
)

// Node and run states.
const (
	Pending   = "pending"   // waiting for parents
	Queued    = "queued"    // enqueued, not started
	Running   = "running"   // a worker executes it
	Done      = "done"      // executed, outputs committed
	Cached    = "cached"    // outputs found under its key, not executed
	Failed    = "failed"    // retries exhausted or a permanent error
	Cancelled = "cancelled" // the run failed or was cancelled first

	Succeeded = "succeeded" // run state: every node done or cached
)

// Finished reports whether a node state is final for the run it is in.
func Finished(state string) bool {
	switch state {
	case Done, Cached, Failed, Cancelled:
		return true
	}
	return false
}

// NodeKey is a node's cache identity: the SHA-256 of its stage name and
// version, its canonical parameters and the digests of its inputs in port
// order. Equal keys mean equal outputs, since stages are deterministic.
func NodeKey(n *spec.Node, inputs map[string][]stages.Artifact) string {
	type keyed struct {
		Stage   string              `json:"stage"`
		Version int                 `json:"version"`
		Params  json.RawMessage     `json:"params"`
		Inputs  map[string][]string `json:"inputs"`
	}
	k := keyed{Stage: n.Stage, Version: n.Version, Params: n.Params, Inputs: map[string][]string{}}
	for port, arts := range inputs {
		for _, a := range arts {
			k.Inputs[port] = append(k.Inputs[port], a.Digest)
		}
	}
	b, err := json.Marshal(k) // map keys sorted
	if err != nil {
		panic(fmt.Sprintf("engine: node key: %v", err))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Short abbreviates a node key or digest for display.
func Short(key string) string {
	if len(key) > 12 {
		return key[:12]
	}
	return key
}

// NodeRecord is what the store keeps for a committed node.
type NodeRecord struct {
	Key      string                     `json:"key"`
	Stage    string                     `json:"stage"`
	Version  int                        `json:"version"`
	Params   json.RawMessage            `json:"params"`
	Inputs   map[string][]string        `json:"inputs"` // port -> input digests
	Outputs  map[string]stages.Artifact `json:"outputs"`
	Run      string                     `json:"run"`
	Node     string                     `json:"node"`
	Started  time.Time                  `json:"started"`
	Finished time.Time                  `json:"finished"`
}

// Run state changes. Every change to the state of an existing run (a node
// starting, completing or failing, the run failing, being cancelled or
// retried, a lost node re-driven) is one Lua script below. A change reads
// and writes several keys of the run at once (the node's state, its
// children's counters, the run's state and count of unfinished nodes) and
// races other workers completing nodes of the same run: a script is atomic
// without the retry loop WATCH/MULTI needs under contention, takes one
// round trip, and touches only keys of one run, which share a hash tag, so
// it also works on a Redis Cluster. The node-key leases (lock.go) and the
// restore lease are scripts for the same reasons. Creating a run's state
// (Submit, restore) is no change of state: it writes keys that nothing
// else writes yet, in one MULTI. Other writes to a node's hash (who runs
// it, progress, the last error) are records for people, not state.

// Redis layout. Every key of a run carries the run id in braces, a hash tag,
// so that the Lua scripts touching several keys of one run also work on a
// Redis Cluster.
type keys struct{ ns, run string }

func (k keys) meta() string          { return k.ns + ":{" + k.run + "}:run" }
func (k keys) states() string        { return k.ns + ":{" + k.run + "}:state" }
func (k keys) waiting() string       { return k.ns + ":{" + k.run + "}:waiting" }
func (k keys) node(id string) string { return k.ns + ":{" + k.run + "}:node:" + id }
func runsIndex(ns string) string     { return ns + ":runs" }
func taskID(run, node string) string { return run + "/" + node }
func runKeys(ns, run string) keys    { return keys{ns: ns, run: run} }
func (k keys) all(nodes []string) []string {
	return append([]string{k.meta(), k.states(), k.waiting()}, k.nodeKeys(nodes)...)
}

func (k keys) nodeKeys(nodes []string) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = k.node(n)
	}
	return out
}

// completeScript marks a node done (or cached) exactly once and releases the
// children whose parents are now all finished. Whether it is the first call
// or a repeat (a handler that ran twice), it returns the children in state
// queued, which the caller enqueues: task ids make that idempotent, so a
// handler that died between this script and the enqueue loses nothing.
// With outputs it first records them in the node's hash, in the same round
// trip: children read their inputs there.
//
// KEYS: states, waiting, meta, node. ARGV: node, final state, now, outputs
// (JSON, or "" to leave the node's hash alone), the node key they are the
// outputs of ("": unchanged), children...
// Returns {transition, children to enqueue, their task id suffixes};
// transition is 0 for a repeat, 1 for the first completion, 2 when it also
// finished the run. A child that waited for a repair of this node (see
// reopenScript) has a suffix: its first task may still be finishing.
var completeScript = redis.NewScript(`
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[4], 'outputs', ARGV[4], 'finished_at', ARGV[3], 'error', '')
end
if ARGV[5] ~= '' then
  redis.call('HSET', KEYS[4], 'key', ARGV[5])
end
local st = redis.call('HGET', KEYS[1], ARGV[1])
local transition = 0
if st ~= 'done' and st ~= 'cached' then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
  transition = 1
  if redis.call('HGET', KEYS[3], 'state') == 'running' then
    for i = 6, #ARGV do
      local n = redis.call('HINCRBY', KEYS[2], ARGV[i], -1)
      if n == 0 and redis.call('HGET', KEYS[1], ARGV[i]) == 'pending' then
        redis.call('HSET', KEYS[1], ARGV[i], 'queued')
      end
    end
    if redis.call('HINCRBY', KEYS[3], 'unfinished', -1) == 0 then
      redis.call('HSET', KEYS[3], 'state', 'succeeded', 'finished_at', ARGV[3])
      transition = 2
    end
  end
end
local ready, suffixes = {}, {}
if redis.call('HGET', KEYS[3], 'state') == 'running' then
  for i = 6, #ARGV do
    if redis.call('HGET', KEYS[1], ARGV[i]) == 'queued' then
      table.insert(ready, ARGV[i])
      table.insert(suffixes, redis.call('HGET', KEYS[2], 'r:' .. ARGV[i]) or '')
    end
  end
end
return {transition, ready, suffixes}
`)

// reopenScript undoes the completion of a node whose output a running child
// found damaged, so that the node executes again and the child after it
// (repair.go). The node goes back to queued and counts as unfinished again;
// its pending children wait for it once more; the child goes back to
// pending, waiting for the node alone (its other parents are finished), and
// is released by the node's next completion under a task id of its own
// (the waiting hash's "r:<child>", the child's count of repairs).
// KEYS: states, waiting, meta, node hash, child hash. ARGV: node, child,
// damaged output's prefix, most repairs per child, the node's children...
// Returns {code, n}: code 0 when nothing changed (the run or the child is
// no longer running), -1 when the child used up its repairs, 1 when the
// node was reopened, with n its count of reopenings, or was already being
// executed again, with n 0; 2 when the node was already executed again (its
// outputs moved): the child is queued again, n its task id suffix.
var reopenScript = redis.NewScript(`
if redis.call('HGET', KEYS[3], 'state') ~= 'running' then return {0, 0} end
if redis.call('HGET', KEYS[1], ARGV[2]) ~= 'running' then return {0, 0} end
local repairs = redis.call('HINCRBY', KEYS[5], 'repairs', 1)
if repairs > tonumber(ARGV[4]) then return {-1, 0} end
redis.call('HSET', KEYS[2], 'r:' .. ARGV[2], repairs)
local st = redis.call('HGET', KEYS[1], ARGV[1])
local reopened = 0
if st == 'done' or st == 'cached' then
  local outs = redis.call('HGET', KEYS[4], 'outputs') or ''
  if not string.find(outs, '"prefix":"' .. ARGV[3] .. '"', 1, true) then
    redis.call('HSET', KEYS[1], ARGV[2], 'queued')
    return {2, repairs}
  end
  redis.call('HSET', KEYS[1], ARGV[1], 'queued')
  redis.call('HINCRBY', KEYS[3], 'unfinished', 1)
  reopened = redis.call('HINCRBY', KEYS[4], 'reopened', 1)
  for i = 5, #ARGV do
    if ARGV[i] ~= ARGV[2] and redis.call('HGET', KEYS[1], ARGV[i]) == 'pending' then
      redis.call('HINCRBY', KEYS[2], ARGV[i], 1)
    end
  end
elseif st ~= 'queued' and st ~= 'running' then
  return {0, 0}
end
redis.call('HSET', KEYS[1], ARGV[2], 'pending')
redis.call('HSET', KEYS[2], ARGV[2], 1)
return {1, reopened}
`)

// startScript moves a node to running if its run is running and the node is
// queued (or running: a retry after a failed attempt or a dead worker).
// KEYS: states, meta, node, the node hashes of its parents. ARGV: node,
// then optionally the count of the task's failed attempts and the fields
// that record who runs the node, set in the node's hash with its attempt
// (failed attempts + re-drives) when it starts.
// Returns {state, redrives, parents' outputs...}: the state the handler
// acts on ("running", the node's final state, or the run's state when it
// is over), how many times the reconciler re-drove the node (see lost.go)
// and, for a node to run, the outputs (JSON) of each parent in KEYS order,
// all in one round trip.
var startScript = redis.NewScript(`
local redrives = tonumber(redis.call('HGET', KEYS[3], 'redrives') or '0') or 0
local st = redis.call('HGET', KEYS[1], ARGV[1])
if st == 'done' or st == 'cached' then return {st, redrives} end
local rs = redis.call('HGET', KEYS[2], 'state')
if rs == false then return {'missing', redrives} end
if rs ~= 'running' then
  if st ~= 'failed' then redis.call('HSET', KEYS[1], ARGV[1], 'cancelled') end
  return {rs, redrives}
end
if st == 'queued' or st == 'running' then
  redis.call('HSET', KEYS[1], ARGV[1], 'running')
  if #ARGV > 2 then
    redis.call('HSET', KEYS[3], 'attempt', tonumber(ARGV[2]) + redrives, unpack(ARGV, 3))
  end
  local out = {'running', redrives}
  for i = 4, #KEYS do
    out[#out+1] = redis.call('HGET', KEYS[i], 'outputs')
  end
  return out
end
return {st or 'missing', redrives}
`)

// failScript marks a node failed and, if its run was running, fails the run
// and cancels every node that has not started. Nodes already running are
// left to finish: their outputs are cached for a retry.
// KEYS: states, meta. ARGV: node, now, error. Returns 1 if it failed the run.
var failScript = redis.NewScript(`
local st = redis.call('HGET', KEYS[1], ARGV[1])
if st == 'done' or st == 'cached' then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], 'failed')
if redis.call('HGET', KEYS[2], 'state') ~= 'running' then return 0 end
redis.call('HSET', KEYS[2], 'state', 'failed', 'finished_at', ARGV[2], 'error', ARGV[3])
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  if all[i+1] == 'pending' or all[i+1] == 'queued' then
    redis.call('HSET', KEYS[1], all[i], 'cancelled')
  end
end
return 1
`)

// retryScript sets the failed and cancelled nodes of a finished run (failed
// or cancelled) to run again: queued when their parents are all done or
// cached, pending otherwise, with their counters of unfinished parents and
// last error reset, and the run running. Nodes done or cached are kept.
// KEYS: states, waiting, meta, then the node hashes in graph order. ARGV:
// the graph, per node its id, its number of parents and their ids.
// Returns {"retried", nodes to run again, {nodes queued}} or, when there is
// nothing to retry, {"refused", the run's state}.
var retryScript = redis.NewScript(`
local rs = redis.call('HGET', KEYS[3], 'state')
if rs == false then return {'refused', 'missing'} end
if rs == 'running' or rs == 'succeeded' then return {'refused', rs} end
local states = {}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do states[all[i]] = all[i+1] end
local function finished(s) return s == 'done' or s == 'cached' end
local again, unfinished, ready = 0, 0, {}
local i, node = 1, 0
while i <= #ARGV do
  local id, np = ARGV[i], tonumber(ARGV[i+1])
  node = node + 1
  local st = states[id]
  if not finished(st) then
    unfinished = unfinished + 1
    if st == 'failed' or st == 'cancelled' then
      again = again + 1
      local left = 0
      for j = 1, np do
        if not finished(states[ARGV[i+1+j]]) then left = left + 1 end
      end
      redis.call('HSET', KEYS[2], id, left)
      if left == 0 then
        redis.call('HSET', KEYS[1], id, 'queued')
        table.insert(ready, id)
      else
        redis.call('HSET', KEYS[1], id, 'pending')
      end
      redis.call('HDEL', KEYS[3+node], 'error', 'progress')
    end
  end
  i = i + 2 + np
end
redis.call('HSET', KEYS[3], 'state', 'running', 'error', '', 'finished_at', '', 'unfinished', unfinished)
return {'retried', again, ready}
`)

// cancelScript cancels a running run: every unfinished node becomes
// cancelled; it returns the nodes that were running, for the caller to
// interrupt.
// KEYS: states, meta. ARGV: now, reason.
var cancelScript = redis.NewScript(`
if redis.call('HGET', KEYS[2], 'state') ~= 'running' then return false end
redis.call('HSET', KEYS[2], 'state', 'cancelled', 'finished_at', ARGV[1], 'error', ARGV[2])
local running = {}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  if all[i+1] == 'pending' or all[i+1] == 'queued' or all[i+1] == 'running' then
    redis.call('HSET', KEYS[1], all[i], 'cancelled')
    if all[i+1] == 'running' then table.insert(running, all[i]) end
  end
end
return running
`)
