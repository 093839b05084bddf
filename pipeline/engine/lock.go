package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nerflow/nerflow/storage"
	"github.com/nerflow/nerflow/storage/layout"
)

// Single flight per node key. Two runs (or two tasks of one node: a re-drive
// racing asynq's own recovery) that need the same node key at once must not
// both compute it. The executor holds a claim on the key in Redis, renewed
// while it works; others wait until the node record appears in the store
// (they are then cached) or the claim lapses (its holder died: they take
// over, from the stage's checkpoint when it has one).
//
// Fencing. A holder can be presumed dead and still be alive: a process
// stopped (SIGSTOP, a long GC pause, a VM migrated) or cut off from Redis
// longer than the lease. When it wakes, another execution may hold the key
// or have committed it. Each claim has a generation, one more than the
// key's previous claim, and a token naming the execution; the claim's hash
// keeps the generation after a release (until keyClaimKeep after the last
// claim), so a woken holder cannot take back a key that was claimed since,
// as it could if a released claim simply vanished. Every commit is fenced:
// the node record is written only after fenceScript confirmed, in Redis,
// that the claim is still this execution's (and extended it over the
// commit), and written with storage.IfAbsent, so that a commit delayed
// past that check still cannot replace another execution's record: of two
// executions exactly one publishes its outputs; the other adopts them and
// says so in its log (commit in worker.go).
//
// The claim is a hash: holder (the token, "" once released), gen, until
// (Redis time in ms when it lapses unless renewed).

func (k keys) keyLock(nodeKey string) string { return k.ns + ":nodelock:" + nodeKey }

// keyClaimKeep is how long a node key's claim hash, and so its generation,
// outlives its last claim: longer than any stall a holder could wake from
// and commit after (tasks run at most 7 days by default).
const keyClaimKeep = 8 * 24 * time.Hour

// claimScript claims a node key for a token if nobody holds it, or its
// holder's claim lapsed.
// KEYS: claim. ARGV: token, lease ms, keep ms.
// Returns {generation, ""} when the token holds the key (newly, or already:
// a retry after a lost reply), {0, holder} when another execution does.
var claimScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local h = redis.call('HMGET', KEYS[1], 'holder', 'until', 'gen')
if h[1] == ARGV[1] then return {tonumber(h[3]), ''} end
if h[1] and h[1] ~= '' and tonumber(h[2] or '0') > now then return {0, h[1]} end
local gen = redis.call('HINCRBY', KEYS[1], 'gen', 1)
redis.call('HSET', KEYS[1], 'holder', ARGV[1], 'until', now + tonumber(ARGV[2]))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {gen, ''}
`)

// renewScript extends the claim of token (generation gen), or takes it
// back if the whole hash vanished (Redis restarted without its data: no
// one else can have claimed the key since). It is also the commit's fence.
// KEYS: claim. ARGV: token, gen, lease ms, keep ms.
// Returns {1, gen} when the claim is the token's; {0, holder, gen} when the
// key was claimed by another execution since (holder "" if that one
// released it already).
var renewScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local h = redis.call('HMGET', KEYS[1], 'holder', 'gen')
if h[1] == false and h[2] == false then
  redis.call('HSET', KEYS[1], 'holder', ARGV[1], 'gen', ARGV[2], 'until', now + tonumber(ARGV[3]))
elseif h[1] == ARGV[1] and h[2] == ARGV[2] then
  redis.call('HSET', KEYS[1], 'until', now + tonumber(ARGV[3]))
else
  return {0, h[1] or '', h[2] or ''}
end
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return {1, ARGV[2]}
`)

// keyReleaseScript releases the claim of token, keeping the generation.
// KEYS: claim. ARGV: token.
var keyReleaseScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'holder') == ARGV[1] then
  redis.call('HSET', KEYS[1], 'holder', '', 'until', 0)
  return 1
end
return 0
`)

// releaseScript deletes a lease (a plain key) if its holder still owns it.
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`)

// keyLease is a held claim on a node key.
type keyLease struct {
	key, token string
	gen        int64
	stop       func() // releases the claim before returning
	lost       <-chan struct{}
	loseOnce   sync.Once
	lostc      chan struct{}
}

// stopAsync releases the claim without waiting for Redis.
func (kl *keyLease) stopAsync() { go kl.stop() }

func (kl *keyLease) markLost() { kl.loseOnce.Do(func() { close(kl.lostc) }) }

// errCommitted says the node record appeared while waiting for the claim.
var errCommitted = errors.New("committed by another execution")

// fencedError says that a claim is no longer its execution's: another one
// claimed the node key since (this one was presumed dead).
type fencedError struct {
	gen, holderGen string
	holder         string
}

func (e *fencedError) Error() string {
	if e.holder == "" {
		return fmt.Sprintf("the node key's claim (generation %s) was taken over (generation %s, released since)", e.gen, e.holderGen)
	}
	return fmt.Sprintf("the node key's claim (generation %s) was taken over by %s (generation %s)", e.gen, e.holder, e.holderGen)
}

func (e *fencedError) Is(target error) bool { return target == errKeyTaken }

// renew runs renewScript for kl: nil while the claim is kl's, a
// *fencedError (which is errKeyTaken) once another execution claimed the
// key, or Redis's error.
func (w *Worker) renew(ctx context.Context, kl *keyLease) error {
	lk := runKeys(w.e.ns, "").keyLock(kl.key)
	res, err := renewScript.Run(ctx, w.e.rdb, []string{lk}, kl.token, kl.gen, w.opts.NodeLease.Milliseconds(), keyClaimKeep.Milliseconds()).Slice()
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		err = connLost{err}
	}
	if err != nil {
		return fmt.Errorf("renewing the claim of node key %s: %w", Short(kl.key), err)
	}
	if ok, _ := res[0].(int64); ok == 1 {
		return nil
	}
	fe := &fencedError{gen: fmt.Sprint(kl.gen)}
	if len(res) == 3 {
		fe.holder, _ = res[1].(string)
		fe.holderGen, _ = res[2].(string)
	}
	kl.markLost()
	return fe
}

// connLost is an EOF of a Redis call: the connection dropped (the server
// or the network went away), which is an outage to wait out, unlike the
// EOF of a truncated file (storage.IsTransient sees a net.Error).
type connLost struct{ err error }

func (e connLost) Error() string { return e.err.Error() }
func (e connLost) Unwrap() error { return e.err }
func (connLost) Timeout() bool   { return false }
func (connLost) Temporary() bool { return true }

// fence confirms, just before a commit, that the claim is still kl's and
// extends it over the commit; see the package's fencing above.
func (w *Worker) fence(ctx context.Context, kl *keyLease) error { return w.renew(ctx, kl) }

// claim runs claimScript for token on node key, with the commands of with
// (if not nil) in the same round trip: the generation when token holds
// key, else 0 and the holder.
func (w *Worker) claim(ctx context.Context, key, token string, with func(redis.Pipeliner)) (int64, string, error) {
	lk := runKeys(w.e.ns, "").keyLock(key)
	args := []any{token, w.opts.NodeLease.Milliseconds(), keyClaimKeep.Milliseconds()}
	var cmd *redis.Cmd
	cmds, _ := w.e.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		if with != nil {
			with(p)
		}
		cmd = claimScript.EvalSha(ctx, p, []string{lk}, args...)
		return nil
	})
	for _, c := range cmds[:len(cmds)-1] {
		if err := c.Err(); err != nil {
			return 0, "", fmt.Errorf("recording who runs node key %s: %w", Short(key), err)
		}
	}
	res, err := cmd.Slice()
	if redis.HasErrorPrefix(err, "NOSCRIPT") {
		res, err = claimScript.Run(ctx, w.e.rdb, []string{lk}, args...).Slice()
	}
	if err != nil {
		return 0, "", fmt.Errorf("claiming node key %s: %w", Short(key), err)
	}
	return claimResult(res)
}

func claimResult(res []any) (int64, string, error) {
	if len(res) != 2 {
		return 0, "", fmt.Errorf("claiming a node key: unexpected reply %v", res)
	}
	gen, _ := res[0].(int64)
	holder, _ := res[1].(string)
	return gen, holder, nil
}

// acquireKey claims node key for token, waiting while another execution
// holds it. It returns errCommitted when that execution committed the key
// meanwhile. The claim is renewed every third of w.opts.NodeLease until
// stop is called; lost is closed if another holder took it over (this
// execution was presumed dead), and the caller should then stop working.
// with, if not nil, adds its commands to the pipeline of the first try.
func (w *Worker) acquireKey(ctx context.Context, log *slog.Logger, key, token string, with func(redis.Pipeliner), onWait func(holder string)) (*keyLease, error) {
	lease := w.opts.NodeLease
	waited := false
	for {
		gen, holder, err := w.claim(ctx, key, token, with)
		with = nil
		if err != nil {
			return nil, err
		}
		if gen > 0 {
			return w.holdKey(log, key, token, gen), nil
		}
		if !waited {
			log.Info("another execution is computing this node key; waiting for it", "key", Short(key), "holder", holder)
			if onWait != nil {
				onWait(holder)
			}
			waited = true
		}
		if _, err := w.e.store.Stat(ctx, layout.NodeRecord(key)); err == nil {
			return nil, errCommitted
		} else if !errors.Is(err, storage.ErrNotFound) && !storage.IsTransient(err) {
			return nil, fmt.Errorf("looking up cache: %w", err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(min(lease/4, 500*time.Millisecond)):
		}
	}
}

// holdKey renews the claim of generation gen on node key that token holds,
// every third of w.opts.NodeLease, until it is stopped or lost.
func (w *Worker) holdKey(log *slog.Logger, key, token string, gen int64) *keyLease {
	lease := w.opts.NodeLease
	lk := runKeys(w.e.ns, "").keyLock(key)
	stopc := make(chan struct{})
	kl := &keyLease{key: key, token: token, gen: gen, lostc: make(chan struct{})}
	kl.lost = kl.lostc
	go func() {
		t := time.NewTicker(lease / 3)
		defer t.Stop()
		for {
			select {
			case <-stopc:
				return
			case <-kl.lost:
				return
			case <-t.C:
			}
			rctx, cancel := context.WithTimeout(context.Background(), lease/3)
			err := w.renew(rctx, kl)
			cancel()
			var fe *fencedError
			if errors.As(err, &fe) {
				log.Warn("lost the claim of the node key to another execution; stopping", "key", Short(key), "err", err)
				return
			}
		}
	}()
	var once sync.Once
	kl.stop = func() {
		once.Do(func() {
			w.leases.Delete(kl)
			close(stopc)
			rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = keyReleaseScript.Run(rctx, w.e.rdb, []string{lk}, token).Err()
		})
	}
	w.leases.Store(kl, kl)
	return kl
}

// keyHolder returns who holds node key's claim ("" when nobody does).
func (e *Engine) keyHolder(ctx context.Context, key string) (string, error) {
	h, err := e.rdb.HGet(ctx, runKeys(e.ns, "").keyLock(key), "holder").Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return h, err
}
