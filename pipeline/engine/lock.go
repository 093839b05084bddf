package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nerflow/nerflow/storage"
	"github.com/nerflow/nerflow/storage/layout"
)

// Single flight per node key. Two runs (or two tasks of one node: a re-drive
// racing asynq's own recovery) that need the same node key at once must not
// both compute it. The executor holds a lease on the key in Redis, renewed
// while it works; others wait until the node record appears in the store
// (they are then cached) or the lease lapses (its holder died: they take
// over, from the stage's checkpoint when it has one).

func (k keys) keyLock(nodeKey string) string { return k.ns + ":nodelock:" + nodeKey }

// renewScript extends a lease its holder still owns, or takes it back if
// it vanished (Redis restarted without its data). Returns 0 when another
// holder owns it now.
// KEYS: lock. ARGV: token, lease in ms.
var renewScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v == false or v == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
`)

// releaseScript deletes a lease if its holder still owns it.
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`)

// keyLease is a held lease on a node key.
type keyLease struct {
	stop func() // releases the lease before returning
	lost <-chan struct{}
}

// stopAsync releases the lease without waiting for Redis.
func (kl *keyLease) stopAsync() { go kl.stop() }

// errCommitted says the node record appeared while waiting for the lease.
var errCommitted = errors.New("committed by another execution")

// acquireKey takes the lease on node key for token, waiting while another
// execution holds it. It returns errCommitted when that execution committed
// the key meanwhile. The lease is renewed every third of w.opts.NodeLease
// until stop is called; lost is closed if another holder took it over (this
// execution was presumed dead), and the caller should then stop working.
// with, if not nil, adds its commands to the pipeline of the first try.
func (w *Worker) acquireKey(ctx context.Context, log *slog.Logger, key, token string, with func(redis.Pipeliner), onWait func(holder string)) (*keyLease, error) {
	lease := w.opts.NodeLease
	lk := runKeys(w.e.ns, "").keyLock(key)
	waited := false
	for {
		var setnx *redis.BoolCmd
		_, err := w.e.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			if with != nil {
				with(p)
				with = nil
			}
			setnx = p.SetNX(ctx, lk, token, lease)
			return nil
		})
		ok := setnx.Val()
		if err != nil {
			return nil, fmt.Errorf("taking the lease of node key %s: %w", Short(key), err)
		}
		if ok {
			break
		}
		if !waited {
			holder, _ := w.e.rdb.Get(ctx, lk).Result()
			if holder == token {
				// Taken by this execution in a round trip whose reply was
				// lost (see early.go).
				break
			}
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
	return w.holdKey(log, key, token), nil
}

// holdKey renews the lease on node key that token holds, every third of
// w.opts.NodeLease, until it is stopped or lost.
func (w *Worker) holdKey(log *slog.Logger, key, token string) *keyLease {
	lease := w.opts.NodeLease
	lk := runKeys(w.e.ns, "").keyLock(key)
	stopc := make(chan struct{})
	lost := make(chan struct{})
	go func() {
		t := time.NewTicker(lease / 3)
		defer t.Stop()
		for {
			select {
			case <-stopc:
				return
			case <-t.C:
			}
			rctx, cancel := context.WithTimeout(context.Background(), lease/3)
			n, err := renewScript.Run(rctx, w.e.rdb, []string{lk}, token, lease.Milliseconds()).Int()
			cancel()
			if err == nil && n == 0 {
				log.Warn("lost the lease of the node key to another execution; stopping", "key", Short(key))
				close(lost)
				return
			}
		}
	}()
	kl := &keyLease{lost: lost}
	var once sync.Once
	kl.stop = func() {
		once.Do(func() {
			w.leases.Delete(kl)
			close(stopc)
			rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = releaseScript.Run(rctx, w.e.rdb, []string{lk}, token).Err()
		})
	}
	w.leases.Store(kl, kl)
	return kl
}
