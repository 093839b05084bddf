package schedule

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nerflow/nerflow/internal/redislock"
	"github.com/nerflow/nerflow/pipeline/engine"
	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/storage/artifact"
)

// Scheduler fires the due ticks of the schedules of a Store, submitting
// runs to an engine. Several may run at once over one Redis.
type Scheduler struct {
	store  *Store
	engine *engine.Engine
	log    *slog.Logger
	now    func() time.Time
	poll   time.Duration
	grace  time.Duration
	name   string
	lease  time.Duration
}

// Option configures a Scheduler.
type Option func(*Scheduler)

// WithClock replaces time.Now (tests drive schedulers with a fake clock).
func WithClock(now func() time.Time) Option {
	return func(s *Scheduler) { s.now = now; s.store.now = now }
}

// WithPollInterval sets how often Run looks at the schedules (default 1s).
func WithPollInterval(d time.Duration) Option { return func(s *Scheduler) { s.poll = d } }

// WithGrace sets how late a tick may be handled and still count as on time
// rather than missed (default 1 minute).
func WithGrace(d time.Duration) Option { return func(s *Scheduler) { s.grace = d } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(s *Scheduler) { s.log = l } }

// WithClaimLease sets how long the claim of a tick outlives a scheduler
// that stopped renewing it (it died right after claiming): the tick is
// fired by another scheduler at most this long, plus a poll interval,
// after the death (default 15s; renewed every third of it).
func WithClaimLease(d time.Duration) Option { return func(s *Scheduler) { s.lease = d } }

// WithName names this scheduler in the events it records (default host:pid).
func WithName(name string) Option { return func(s *Scheduler) { s.name = name } }

// New returns a scheduler of the schedules in store, submitting to e.
func New(store *Store, e *engine.Engine, opts ...Option) *Scheduler {
	host, _ := os.Hostname()
	s := &Scheduler{store: store, engine: e, log: slog.Default(), now: time.Now, poll: time.Second,
		grace: time.Minute, name: host + ":" + strconv.Itoa(os.Getpid()), lease: 15 * time.Second}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Run handles due ticks every poll interval until ctx is done.
func (s *Scheduler) Run(ctx context.Context) error {
	s.log.Info("scheduler started", "scheduler", s.name, "poll", s.poll)
	t := time.NewTicker(s.poll)
	defer t.Stop()
	for {
		if _, err := s.Tick(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("scheduler tick", "err", err)
		}
		select {
		case <-ctx.Done():
			s.log.Info("scheduler stopped", "scheduler", s.name)
			return nil
		case <-t.C:
		}
	}
}

// Tick handles every schedule that has a due tick now and returns the
// events this scheduler recorded (ticks claimed by another scheduler are
// not among them).
func (s *Scheduler) Tick(ctx context.Context) ([]Event, error) {
	entries, err := s.store.List(ctx)
	if err != nil {
		return nil, err
	}
	now := s.now().UTC()
	var events []Event
	var errs []error
	for _, e := range entries {
		if e.Paused {
			continue
		}
		ev, err := s.tickOne(ctx, &e, now)
		if err != nil {
			errs = append(errs, fmt.Errorf("schedule %s: %w", e.Name, err))
			continue
		}
		if ev != nil {
			events = append(events, *ev)
		}
	}
	return events, errors.Join(errs...)
}

// due returns the latest tick of c in (after, now] and how many ticks fell
// in that interval (counting stops at a million).
func due(c interface{ Next(time.Time) time.Time }, after, now time.Time) (time.Time, int) {
	var last time.Time
	n := 0
	for t := c.Next(after); !t.IsZero() && !t.After(now) && n < 1_000_000; t = c.Next(t) {
		last = t
		n++
	}
	return last, n
}

// claimTTL keeps the claim of a tick for two periods of the schedule, at
// least an hour and at most a week.
func claimTTL(c interface{ Next(time.Time) time.Time }, tick time.Time) time.Duration {
	next := c.Next(tick)
	return min(max(2*next.Sub(tick), time.Hour), 7*24*time.Hour)
}

func (s *Scheduler) tickOne(ctx context.Context, e *Entry, now time.Time) (*Event, error) {
	c, err := ParseCron(e.Cron)
	if err != nil {
		return nil, err
	}
	from := e.State.LastTick
	if from.IsZero() {
		from = e.Created
	}
	tick, n := due(c, from, now)
	if n == 0 {
		return nil, nil
	}
	// Exactly one scheduler handles a tick: the one that holds its claim.
	// The claim is a lease, renewed while the tick is fired (which may hash
	// large datasets): a scheduler that dies after claiming lets it lapse,
	// and another claims the tick at its next poll. The run a tick submits
	// has an id made of the schedule and the tick, so that a scheduler
	// that takes over from one that died after submitting finds that run
	// instead of submitting another; and a tick is recorded only by the
	// holder of its claim, after which the claim is kept for claimTTL and
	// no scheduler finds the tick due.
	lease, err := s.claim(ctx, e.Name, tick)
	if err != nil || lease == nil {
		return nil, err
	}
	fireCtx, stop := s.holdClaim(ctx, lease)
	defer stop()
	state := e.State
	state.LastTick = tick
	ev := Event{Tick: tick, At: now, Missed: n - 1, Scheduler: s.name}
	late := now.Sub(tick) > s.grace
	switch {
	case late && e.Missed == MissedSkip:
		ev.Outcome, ev.Missed = OutcomeMissed, n
		ev.Detail = fmt.Sprintf("%d missed tick(s) skipped (policy %s)", n, MissedSkip)
	default:
		s.fire(fireCtx, &e.Schedule, &state, &ev)
		if late {
			ev.Detail = fmt.Sprintf("late by %s; %d missed tick(s) run once (policy %s). %s",
				now.Sub(tick).Round(time.Second), n, MissedRunOnce, ev.Detail)
		}
	}
	if err := s.store.record(ctx, e.Name, state, ev, lease.Key(), lease.Token(), claimTTL(c, tick)); err != nil {
		return nil, err
	}
	s.log.Info("schedule tick", "schedule", e.Name, "tick", tick, "outcome", ev.Outcome, "run", ev.Run, "detail", ev.Detail)
	return &ev, nil
}

// fire submits a run of the schedule unless its previous one is running or
// the last successful one is up to date.
func (s *Scheduler) fire(ctx context.Context, sc *Schedule, state *State, ev *Event) {
	fail := func(err error) { ev.Outcome, ev.Detail = OutcomeError, err.Error() }
	if state.LastRun != "" {
		st, err := s.engine.Status(ctx, state.LastRun)
		switch {
		case errors.Is(err, engine.ErrNoRun):
		case err != nil:
			fail(fmt.Errorf("reading run %s: %w", state.LastRun, err))
			return
		case st.State == engine.Running:
			ev.Outcome, ev.Run = OutcomeOverlap, state.LastRun
			ev.Detail = "the previous run is still running"
			return
		case st.State == engine.Succeeded:
			state.LastSuccess = state.LastRun
		}
	}
	g, text, err := sc.Graph()
	if err != nil {
		fail(err)
		return
	}
	if state.LastSuccess != "" {
		same, why, err := s.upToDate(ctx, g, state.LastSuccess)
		if err != nil {
			fail(err)
			return
		}
		if same {
			ev.Outcome, ev.Run = OutcomeUpToDate, state.LastSuccess
			ev.Detail = "spec and inputs unchanged since run " + state.LastSuccess
			return
		}
		ev.Detail = why
	}
	id, err := s.engine.Submit(ctx, g, engine.SubmitOptions{Spec: text, SpecFile: sc.SpecFile, Overrides: sc.Overrides,
		ID: tickRunID(sc.Name, ev.Tick)})
	switch {
	case errors.Is(err, engine.ErrRunExists):
		ev.Detail = strings.TrimPrefix(ev.Detail+"; ", "; ") + "run submitted for this tick by a scheduler that stopped before recording it"
	case err != nil:
		fail(err)
		return
	}
	state.LastRun = id
	ev.Outcome, ev.Run = OutcomeSubmitted, id
}

// claim claims tick of schedule name for this scheduler, for the lease;
// nil when another scheduler holds it.
func (s *Scheduler) claim(ctx context.Context, name string, tick time.Time) (*redislock.Lease, error) {
	l, err := redislock.TryLock(ctx, s.store.rdb, s.store.claimKey(name, tick), s.lease)
	switch {
	case errors.Is(err, redislock.ErrNotHeld):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("claiming tick: %w", err)
	}
	return l, nil
}

// tickRunID is the id of the run that tick of schedule name submits: the
// tick's time, in the form of other run ids, and a digest of the name.
func tickRunID(name string, tick time.Time) string {
	sum := sha256.Sum256([]byte(name))
	return tick.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(sum[:6])
}

// holdClaim renews the claim l every third of the lease until stop
// is called; the context it returns is cancelled if the claim is lost (this
// scheduler stalled past its lease and another took the tick over).
func (s *Scheduler) holdClaim(ctx context.Context, l *redislock.Lease) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(s.lease / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			held, err := l.Extend(ctx, s.lease)
			if err == nil && !held {
				s.log.Warn("lost the claim of a tick to another scheduler; stopping", "claim", l.Key())
				cancel()
				return
			}
		}
	}()
	return ctx, func() { cancel(); <-done }
}

// upToDate reports whether graph g would compute exactly what run did: the
// same nodes (stage versions, parameters, wiring), the same dataset
// contents, and every output of that run still in the store. Then every
// node key is the same and the run would be served from the cache.
func (s *Scheduler) upToDate(ctx context.Context, g *spec.Graph, run string) (bool, string, error) {
	m, err := s.engine.RunManifest(ctx, run)
	if errors.Is(err, engine.ErrNoRun) {
		return false, "the last successful run " + run + " is gone", nil
	}
	if err != nil {
		return false, "", err
	}
	if m.State != engine.Succeeded {
		// Redis said it succeeded; its final manifest is on its way.
		return false, "the manifest of run " + run + " is not final yet", nil
	}
	a, _ := json.Marshal(g)
	b, _ := json.Marshal(m.Graph)
	if !bytes.Equal(a, b) {
		return false, "spec changed since run " + run, nil
	}
	datasets, err := s.engine.ImportDatasets(ctx, g)
	if err != nil {
		return false, "", err
	}
	for name, d := range datasets {
		if m.Datasets[name].Digest != d.Digest {
			return false, "dataset " + name + " changed since run " + run, nil
		}
	}
	for _, n := range m.Nodes {
		for out, o := range n.Outputs {
			ok, err := artifact.Stored(ctx, s.engine.Store(), o)
			if err != nil {
				return false, "", err
			}
			if !ok {
				return false, fmt.Sprintf("output %s of %s is no longer in the store", out, n.ID), nil
			}
		}
	}
	return true, "", nil
}
