package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/storage"
)

// Embedded is a whole cluster in one process: an in-process Redis
// (miniredis), the engine and a worker serving both queues. It runs the very
// code a cluster runs; only the Redis server and the process boundaries
// differ.
type Embedded struct {
	*Engine
	mr     *miniredis.Miniredis
	rdb    *redis.Client
	worker *Worker
}

// StartEmbedded starts miniredis and a worker over store.
func StartEmbedded(store storage.Store, wopts WorkerOptions, opts ...Option) (*Embedded, error) {
	mr, rdb, err := StartPrivateRedis()
	if err != nil {
		return nil, err
	}
	// This Redis was born empty with this process: runs of the store that
	// it does not know belong to other processes, not to restore here.
	e := New(rdb, store, append(opts, WithPrivateRedis())...)
	if len(wopts.Queues) == 0 {
		wopts.Queues = []string{"gpu", "cpu"}
	}
	if wopts.Name == "" {
		wopts.Name = "embedded"
	}
	w := e.NewWorker(wopts)
	if err := w.Start(); err != nil {
		e.Close()
		rdb.Close()
		mr.Close()
		return nil, err
	}
	return &Embedded{Engine: e, mr: mr, rdb: rdb, worker: w}, nil
}

// Run submits g and waits for it, calling onStatus with each poll. When ctx
// is cancelled (Ctrl-C) it cancels the run, waits for running stages to
// stop, and returns the final status with ctx's error. Finished nodes are
// in the cache, so running the same spec again resumes where this stopped.
func (em *Embedded) Run(ctx context.Context, g *spec.Graph, sopts SubmitOptions, poll time.Duration, onStatus func(*RunStatus)) (*RunStatus, error) {
	id, err := em.Submit(ctx, g, sopts)
	if err != nil {
		return nil, err
	}
	st, err := em.Wait(ctx, id, poll, onStatus)
	if err == nil {
		return st, nil
	}
	if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return st, err
	}
	bg := context.WithoutCancel(ctx)
	if cerr := em.Cancel(bg, id, "interrupted"); cerr != nil {
		em.log.Warn("cancelling run", "run", id, "err", cerr)
	}
	// Let interrupted stages return before the worker goes away.
	wctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	for {
		st, serr := em.Status(wctx, id)
		if serr != nil || st.Counts()[Running] == 0 || wctx.Err() != nil {
			if onStatus != nil && st != nil {
				onStatus(st)
			}
			return st, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// StartPrivateRedis starts an in-process Redis (miniredis) that only this
// process can use: it listens on a loopback port (miniredis has no unix
// sockets) and requires a random password, so that another local user
// cannot read or change run state.
func StartPrivateRedis() (*miniredis.Miniredis, *redis.Client, error) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, nil, err
	}
	pw := hex.EncodeToString(b[:])
	mr := miniredis.NewMiniRedis()
	mr.RequireAuth(pw)
	// asynq relies on key expiry (task retention, server heartbeats); make
	// miniredis expire keys as real time passes.
	mr.ClockTTL(true)
	if err := mr.StartAddr("127.0.0.1:0"); err != nil {
		return nil, nil, fmt.Errorf("starting in-process redis: %w", err)
	}
	return mr, redis.NewClient(&redis.Options{Addr: mr.Addr(), Password: pw}), nil
}

// Close stops the worker and the in-process Redis.
func (em *Embedded) Close() error {
	em.worker.Shutdown()
	err := em.Engine.Close()
	em.rdb.Close()
	em.mr.Close()
	return err
}
