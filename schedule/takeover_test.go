package schedule

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nerflow/nerflow/internal/testenv"
	"github.com/nerflow/nerflow/pipeline/engine"
	_ "github.com/nerflow/nerflow/pipeline/teststages"
	"github.com/nerflow/nerflow/storage/fsstore"
)

type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// A scheduler that dies right after claiming a tick leaves only its claim
// in Redis. The other scheduler fires the tick once the claim's lease has
// lapsed (bounded time), exactly once: a scheduler that died after
// submitting the tick's run leaves that run, which the other finds instead
// of submitting a second; and a scheduler that wakes after the takeover
// (stalled past its lease) records nothing.
func TestTickClaimedByADeadScheduler(t *testing.T) {
	addr := testenv.Redis(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var b [4]byte
	_, _ = rand.Read(b[:])
	ns := "nftest-" + hex.EncodeToString(b[:])
	dir := t.TempDir()
	specFile := filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(specFile, []byte("name: s\nnodes:\n  a: {stage: test.emit, params: {text: tick}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	e := engine.New(rdb, st, engine.WithNamespace(ns), engine.WithLogger(quiet))
	defer e.Close()
	clock := &testClock{t: time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)}
	store := NewStore(rdb, ns)
	store.now = clock.now
	const lease = time.Second
	b1 := New(store, e, WithClock(clock.now), WithName("survivor"), WithLogger(quiet), WithClaimLease(lease))
	for _, name := range []string{"dies-after-claim", "dies-after-submit"} {
		if err := store.Add(ctx, Schedule{Name: name, Cron: "0 2 * * *", SpecFile: specFile}); err != nil {
			t.Fatal(err)
		}
	}
	tick := time.Date(2026, 1, 1, 2, 0, 0, 0, time.UTC)
	clock.set(tick.Add(5 * time.Second))

	// What two schedulers did before they died: each claimed a tick, and
	// the second also submitted the tick's run.
	dead := New(store, e, WithClock(clock.now), WithName("dead"), WithLogger(quiet), WithClaimLease(lease))
	var orphan string
	for _, name := range []string{"dies-after-claim", "dies-after-submit"} {
		if l, err := dead.claim(ctx, name, tick); err != nil || l == nil {
			t.Fatalf("claiming %s: %v %v", name, l, err)
		}
		if name == "dies-after-submit" {
			sc, state, err := store.Get(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			ev := Event{Tick: tick}
			dead.fire(ctx, sc, state, &ev)
			if ev.Outcome != OutcomeSubmitted {
				t.Fatalf("the dead scheduler's firing: %+v", ev)
			}
			orphan = ev.Run
		}
	}
	g, text, err := (&Schedule{Name: "dies-after-submit", SpecFile: specFile}).Graph()
	if err != nil {
		t.Fatal(err)
	}
	claimed := time.Now()

	events := map[string]Event{}
	for len(events) < 2 && time.Since(claimed) < 10*time.Second {
		evs, err := b1.Tick(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if _, dup := events[ev.Run]; dup {
				t.Errorf("a tick fired twice: %+v", ev)
			}
			events[ev.Run] = ev
			if time.Since(claimed) < lease-100*time.Millisecond {
				t.Errorf("fired %v after the dead scheduler's claim, before its lease of %v lapsed", time.Since(claimed), lease)
			}
			t.Logf("tick taken over and fired %v after the dead scheduler's claim (lease %v): %s %s %s",
				time.Since(claimed).Round(10*time.Millisecond), lease, ev.Outcome, ev.Run, ev.Detail)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(events) != 2 {
		t.Fatalf("fired %d of the 2 ticks claimed by dead schedulers within 10 s: %+v", len(events), events)
	}
	for name, wantRun := range map[string]string{"dies-after-claim": tickRunID("dies-after-claim", tick), "dies-after-submit": orphan} {
		h, err := store.History(ctx, name, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(h) != 1 || h[0].Outcome != OutcomeSubmitted || h[0].Run != wantRun || h[0].Scheduler != "survivor" {
			t.Errorf("history of %s: %+v, want one submitted event of run %s by the survivor", name, h, wantRun)
		}
	}
	runs, err := e.Runs(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 {
		t.Errorf("%d runs, want 2 (one per tick): %+v", len(runs), runs)
	}
	// Ticking again fires nothing.
	if evs, err := b1.Tick(ctx); err != nil || len(evs) != 0 {
		t.Errorf("tick after the takeover: %v %+v", err, evs)
	}
	// A scheduler that stalled past its lease and wakes after the
	// takeover records nothing: the claim is not its own.
	err = store.record(ctx, "dies-after-claim", State{LastTick: tick}, Event{Tick: tick, Outcome: OutcomeSubmitted, Scheduler: "dead"},
		store.claimKey("dies-after-claim", tick), "dead#stale", time.Hour)
	if !errors.Is(err, errClaimLost) {
		t.Errorf("a late record: %v, want errClaimLost", err)
	}
	if h, _ := store.History(ctx, "dies-after-claim", 10); len(h) != 1 {
		t.Errorf("history after a late record: %+v", h)
	}
	// Its late submit finds the run: no second run.
	if _, err := e.Submit(ctx, g, engine.SubmitOptions{Spec: text, ID: tickRunID("dies-after-submit", tick)}); !errors.Is(err, engine.ErrRunExists) {
		t.Errorf("a second submit of a tick's run: %v, want ErrRunExists", err)
	}
}
