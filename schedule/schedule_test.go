package schedule_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nerflow/nerflow/internal/testenv"
	"github.com/nerflow/nerflow/pipeline/engine"
	_ "github.com/nerflow/nerflow/pipeline/teststages"
	"github.com/nerflow/nerflow/schedule"
	"github.com/nerflow/nerflow/storage/fsstore"
)

// fakeClock is the time every scheduler of a test sees.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

const nightlySpec = `
name: nightly
nodes:
  text: {stage: test.concat, inputs: {in: ./data}, params: {suffix: "!"}}
  train: {stage: test.seed, inputs: {in: text.out}, params: {seed: 2}}
`

func day(d, h, m int) time.Time { return time.Date(2026, 1, d, h, m, 0, 0, time.UTC) }

func TestTwoSchedulersFakeClock(t *testing.T) {
	addr := testenv.Redis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var b [4]byte
	_, _ = rand.Read(b[:])
	ns := "nftest-" + hex.EncodeToString(b[:])
	dir := t.TempDir()
	specFile := filepath.Join(dir, "nightly.yaml")
	if err := os.WriteFile(specFile, []byte(nightlySpec), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data", "out.txt")
	if err := os.WriteFile(data, []byte("v1"), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	clock := &fakeClock{t: day(1, 1, 0)}
	// Two scheduler processes and a worker, each with its own connection.
	newEngine := func() (*engine.Engine, *redis.Client) {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		e := engine.New(rdb, st, engine.WithNamespace(ns), engine.WithLogger(quiet))
		t.Cleanup(func() { e.Close(); rdb.Close() })
		return e, rdb
	}
	var scheds []*schedule.Scheduler
	var stores []*schedule.Store
	for _, name := range []string{"sched-a", "sched-b"} {
		e, rdb := newEngine()
		store := schedule.NewStore(rdb, ns)
		stores = append(stores, store)
		scheds = append(scheds, schedule.New(store, e, schedule.WithClock(clock.Now), schedule.WithName(name), schedule.WithLogger(quiet)))
	}
	we, _ := newEngine()
	w := we.NewWorker(engine.WorkerOptions{Concurrency: 2, ShutdownTimeout: time.Second})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Shutdown()
	store := stores[0]

	if err := schedule.NewStore(nil, ns).Add(ctx, schedule.Schedule{Name: "Bad", Cron: "0 2 * * *", SpecFile: specFile}); err == nil ||
		!strings.Contains(err.Error(), "invalid schedule name") {
		t.Errorf("bad name: %v", err)
	}
	if err := store.Add(ctx, schedule.Schedule{Name: "x", Cron: "0 25 * * *", SpecFile: specFile}); err == nil {
		t.Error("a bad cron expression was accepted")
	}
	clock.Set(day(1, 1, 0))
	if err := store.Add(ctx, schedule.Schedule{Name: "nightly", Cron: "0 2 * * *", SpecFile: specFile, Missed: schedule.MissedRunOnce}); err != nil {
		t.Fatal(err)
	}
	if err := store.Add(ctx, schedule.Schedule{Name: "nightly", Cron: "0 3 * * *", SpecFile: specFile}); err == nil {
		t.Error("a second schedule of the same name was accepted")
	}

	// tickBoth ticks both schedulers at once and returns every event.
	tickBoth := func(at time.Time) []schedule.Event {
		t.Helper()
		clock.Set(at)
		var mu sync.Mutex
		var all []schedule.Event
		var wg sync.WaitGroup
		for _, s := range scheds {
			wg.Add(1)
			go func() {
				defer wg.Done()
				evs, err := s.Tick(ctx)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				all = append(all, evs...)
				mu.Unlock()
			}()
		}
		wg.Wait()
		return all
	}
	wait := func(run string) {
		t.Helper()
		rs, err := we.Wait(ctx, run, 20*time.Millisecond, nil)
		if err != nil || rs.State != engine.Succeeded {
			t.Fatalf("run %s: %v %+v", run, err, rs)
		}
		// Its final manifest follows the state in Redis.
		for {
			m, err := we.RunManifest(ctx, run)
			if err == nil && m.State == engine.Succeeded {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("run %s: no final manifest", run)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	one := func(evs []schedule.Event, outcome string) schedule.Event {
		t.Helper()
		if len(evs) != 1 {
			t.Fatalf("%d events, want exactly one: %+v", len(evs), evs)
		}
		if evs[0].Outcome != outcome {
			t.Fatalf("outcome %s (%s), want %s", evs[0].Outcome, evs[0].Detail, outcome)
		}
		return evs[0]
	}

	if evs := tickBoth(day(1, 1, 59)); len(evs) != 0 {
		t.Fatalf("before the first tick: %+v", evs)
	}
	ev := one(tickBoth(day(1, 2, 0).Add(3*time.Second)), schedule.OutcomeSubmitted)
	if !ev.Tick.Equal(day(1, 2, 0)) || ev.Missed != 0 {
		t.Errorf("first event %+v", ev)
	}
	// Both schedulers look again within the same tick: nothing more.
	if evs := tickBoth(day(1, 2, 0).Add(4 * time.Second)); len(evs) != 0 {
		t.Fatalf("same tick fired again: %+v", evs)
	}
	wait(ev.Run)
	first := ev.Run

	// Next night: same spec, same data: up to date, no run.
	ev = one(tickBoth(day(2, 2, 0).Add(time.Second)), schedule.OutcomeUpToDate)
	if ev.Run != first {
		t.Errorf("up to date with %s, want %s", ev.Run, first)
	}
	// The data changed: a run.
	if err := os.WriteFile(data, []byte("v2"), 0o644); err != nil {
		t.Fatal(err)
	}
	ev = one(tickBoth(day(3, 2, 0).Add(time.Second)), schedule.OutcomeSubmitted)
	if !strings.Contains(ev.Detail, "dataset") {
		t.Errorf("detail %q, want the changed dataset named", ev.Detail)
	}
	wait(ev.Run)
	// The spec changed (an override): a run.
	if err := os.WriteFile(specFile, []byte(strings.Replace(nightlySpec, "seed: 2", "seed: 3", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	ev = one(tickBoth(day(4, 2, 0).Add(time.Second)), schedule.OutcomeSubmitted)
	if !strings.Contains(ev.Detail, "spec changed") {
		t.Errorf("detail %q, want spec changed", ev.Detail)
	}
	wait(ev.Run)

	// Every scheduler down for three nights: run once, late.
	ev = one(tickBoth(day(7, 9, 30)), schedule.OutcomeUpToDate)
	if !ev.Tick.Equal(day(7, 2, 0)) || ev.Missed != 2 || !strings.Contains(ev.Detail, "late") {
		t.Errorf("after 3 missed nights: %+v", ev)
	}

	// Policy skip: missed ticks fire nothing; an on-time tick fires.
	clock.Set(day(7, 9, 30))
	if err := store.Add(ctx, schedule.Schedule{Name: "hourly", Cron: "@hourly", SpecFile: specFile, Missed: schedule.MissedSkip}); err != nil {
		t.Fatal(err)
	}
	if err := store.Pause(ctx, "nightly"); err != nil {
		t.Fatal(err)
	}
	ev = one(tickBoth(day(7, 14, 10)), schedule.OutcomeMissed)
	if ev.Missed != 5 || !ev.Tick.Equal(day(7, 14, 0)) {
		t.Errorf("skip policy: %+v", ev)
	}
	// On time, and this schedule has no successful run of its own yet.
	ev = one(tickBoth(day(7, 15, 0).Add(2*time.Second)), schedule.OutcomeSubmitted)
	wait(ev.Run)
	if err := store.Remove(ctx, "hourly"); err != nil {
		t.Fatal(err)
	}
	// Paused across a night: nothing, and resuming does not catch up.
	if evs := tickBoth(day(8, 2, 0).Add(time.Second)); len(evs) != 0 {
		t.Fatalf("a paused schedule fired: %+v", evs)
	}
	clock.Set(day(8, 10, 0))
	if err := store.Resume(ctx, "nightly"); err != nil {
		t.Fatal(err)
	}
	if evs := tickBoth(day(8, 10, 0).Add(time.Second)); len(evs) != 0 {
		t.Fatalf("resume caught up: %+v", evs)
	}
	one(tickBoth(day(9, 2, 0).Add(time.Second)), schedule.OutcomeUpToDate)

	// Many ticks, both schedulers racing: each tick fires exactly once.
	var last schedule.Event
	for d := 10; d < 20; d++ {
		last = one(tickBoth(day(d, 2, 0).Add(time.Duration(d)*time.Second)), schedule.OutcomeUpToDate)
	}

	hist, err := store.History(ctx, "nightly", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 16 || hist[len(hist)-1].Run != first {
		t.Errorf("history has %d events (want 16), oldest %+v", len(hist), hist[len(hist)-1])
	}
	by := map[string]int{}
	for _, h := range hist {
		by[h.Scheduler]++
	}
	t.Logf("ticks handled per scheduler: %v", by)
	list, err := store.List(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "nightly" || !list[0].Next.Equal(day(20, 2, 0)) {
		t.Errorf("list %+v (%v)", list, err)
	}

	// An output of the last successful run is gone from the store: a run,
	// although spec and data are unchanged.
	m, err := we.RunManifest(ctx, last.Run)
	if err != nil {
		t.Fatal(err)
	}
	text, _ := m.Node("text")
	out := text.Outputs["out"]
	if err := st.Delete(ctx, out.Key(out.Files[0].Name)); err != nil {
		t.Fatal(err)
	}
	ev = one(tickBoth(day(20, 2, 0).Add(time.Second)), schedule.OutcomeSubmitted)
	if !strings.Contains(ev.Detail, "output out of text is no longer in the store") {
		t.Errorf("detail %q, want the missing output named", ev.Detail)
	}
	wait(ev.Run)
}

// A tick that comes while the previous run still runs is skipped.
func TestOverlapSkipped(t *testing.T) {
	addr := testenv.Redis(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var b [4]byte
	_, _ = rand.Read(b[:])
	ns := "nftest-" + hex.EncodeToString(b[:])
	specFile := filepath.Join(t.TempDir(), "slow.yaml")
	if err := os.WriteFile(specFile, []byte("name: slow\nnodes:\n  s: {stage: test.slow, params: {steps: 3, step_time: 10ms}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	e := engine.New(rdb, st, engine.WithNamespace(ns), engine.WithLogger(slog.New(slog.DiscardHandler)))
	defer e.Close()
	clock := &fakeClock{t: day(1, 0, 30)}
	store := schedule.NewStore(rdb, ns)
	s := schedule.New(store, e, schedule.WithClock(clock.Now), schedule.WithLogger(slog.New(slog.DiscardHandler)))
	if err := store.Add(ctx, schedule.Schedule{Name: "slow", Cron: "@hourly", SpecFile: specFile}); err != nil {
		t.Fatal(err)
	}
	clock.Set(day(1, 1, 0))
	evs, err := s.Tick(ctx)
	if err != nil || len(evs) != 1 || evs[0].Outcome != schedule.OutcomeSubmitted {
		t.Fatalf("first tick: %+v %v", evs, err)
	}
	run := evs[0].Run
	// No worker: the run stays running.
	clock.Set(day(1, 2, 0))
	evs, err = s.Tick(ctx)
	if err != nil || len(evs) != 1 || evs[0].Outcome != schedule.OutcomeOverlap || evs[0].Run != run {
		t.Fatalf("second tick: %+v %v", evs, err)
	}
}
