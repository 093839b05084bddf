// Package redislock is a lease on a Redis key: SET NX with an expiry, held by
// a random token so that only its holder releases or extends it. A holder
// that dies leaves the lease to expire; nothing waits for it forever.
//
// It is the single-instance Redis lock (no Redlock): nerflow's scheduler and
// model registry use it to keep two processes from doing the same work at
// once, and both remain correct, only slower or duplicated, if a lease lapses
// early.
package redislock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotHeld is returned by TryLock when another holder has the key.
var ErrNotHeld = errors.New("redislock: held by another process")

// Lease is a held lock.
type Lease struct {
	rdb   redis.UniversalClient
	key   string
	token string
}

// TryLock takes key for ttl, or returns ErrNotHeld at once when someone else
// holds it.
func TryLock(ctx context.Context, rdb redis.UniversalClient, key string, ttl time.Duration) (*Lease, error) {
	var b [12]byte
	_, _ = rand.Read(b[:])
	l := &Lease{rdb: rdb, key: key, token: hex.EncodeToString(b[:])}
	ok, err := rdb.SetNX(ctx, key, l.token, ttl).Result()
	if err != nil {
		return nil, fmt.Errorf("locking %s: %w", key, err)
	}
	if !ok {
		return nil, ErrNotHeld
	}
	return l, nil
}

// Lock waits (polling every 50ms) until key is free or ctx is done.
func Lock(ctx context.Context, rdb redis.UniversalClient, key string, ttl time.Duration) (*Lease, error) {
	for {
		l, err := TryLock(ctx, rdb, key, ttl)
		if !errors.Is(err, ErrNotHeld) {
			return l, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for lock %s: %w", key, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

var unlockScript = redis.NewScript(`
if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end
return 0`)

// Unlock releases the lease if it is still ours; a lapsed lease that
// someone else took is left alone.
func (l *Lease) Unlock(ctx context.Context) error {
	if err := unlockScript.Run(ctx, l.rdb, []string{l.key}, l.token).Err(); err != nil {
		return fmt.Errorf("unlocking %s: %w", l.key, err)
	}
	return nil
}

var extendScript = redis.NewScript(`
if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("PEXPIRE", KEYS[1], ARGV[2]) end
return 0`)

// Extend sets the lease's expiry to ttl from now if it is still ours; false
// when it lapsed and someone else took the key.
func (l *Lease) Extend(ctx context.Context, ttl time.Duration) (bool, error) {
	n, err := extendScript.Run(ctx, l.rdb, []string{l.key}, l.token, ttl.Milliseconds()).Int()
	if err != nil {
		return false, fmt.Errorf("extending %s: %w", l.key, err)
	}
	return n == 1, nil
}

// Key is the locked key.
func (l *Lease) Key() string { return l.key }

// Token is the value the key holds while the lease is ours, for callers
// that check it inside their own transactions.
func (l *Lease) Token() string { return l.token }
