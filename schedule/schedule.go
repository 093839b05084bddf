// Package schedule runs pipeline specs on cron schedules ("0 2 * * *":
// nightly retraining).
//
// Schedules live in Redis (Store). Any number of processes may run a
// Scheduler over the same Redis: each looks at the schedules every second,
// and a tick of a schedule fires in exactly one of them, the one that claims
// it first (a Redis key per schedule and tick, SET NX with an expiry). A
// firing loads the spec from its file (so edits to the spec apply from the
// next tick), and
//
//   - skips the tick if the schedule's previous run is still running;
//   - records the tick as up to date, without a run, when the graph (stages,
//     versions, parameters) and the content of every input dataset are those
//     of the schedule's last successful run and that run's outputs are still
//     in the store: every node key would be the same, so every node would be
//     served from the cache;
//   - otherwise submits a run.
//
// Missed ticks: when every scheduler was down across one or more ticks, the
// schedule's missed-tick policy decides. MissedRunOnce (the default) fires
// once for the latest missed tick, however many were missed; MissedSkip
// fires nothing and waits for the next tick. A tick counts as missed when
// it is more than Grace old when a scheduler first sees it. Ticks that fall
// while a schedule is paused are skipped: resuming does not catch up.
//
// Cron expressions have five fields (minute hour day-of-month month
// day-of-week) or a descriptor (@daily, @hourly, @every 6h), parsed by
// robfig/cron; they are evaluated in UTC unless prefixed with CRON_TZ=Zone.
package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/robfig/cron/v3"

	"github.com/nerflow/nerflow/pipeline/spec"
)

// Missed-tick policies.
const (
	MissedRunOnce = "run-once"
	MissedSkip    = "skip"
)

// Schedule is a spec run on a cron schedule.
type Schedule struct {
	Name string `json:"name"`
	Cron string `json:"cron"`
	// SpecFile is the spec's absolute path, read at every tick.
	SpecFile string `json:"spec_file"`
	// Overrides are --set values applied to it.
	Overrides []string `json:"overrides,omitempty"`
	// Missed is the missed-tick policy (MissedRunOnce or MissedSkip).
	Missed  string    `json:"missed"`
	Paused  bool      `json:"paused,omitempty"`
	Created time.Time `json:"created"`
}

// State is what the schedulers recorded of a schedule.
type State struct {
	// LastTick is the last tick handled (fired, skipped or up to date);
	// ticks after it are due.
	LastTick time.Time `json:"last_tick"`
	// LastRun is the last run the schedule submitted; LastSuccess the last
	// one known to have succeeded.
	LastRun     string `json:"last_run,omitempty"`
	LastSuccess string `json:"last_success,omitempty"`
	// Last is the latest event.
	Last *Event `json:"last,omitempty"`
}

// Event is what became of one tick.
type Event struct {
	Tick time.Time `json:"tick"`
	At   time.Time `json:"at"`
	// Outcome is one of the Outcome constants.
	Outcome string `json:"outcome"`
	// Run is the submitted run (OutcomeSubmitted) or the run the tick is
	// up to date with (OutcomeUpToDate).
	Run string `json:"run,omitempty"`
	// Missed counts the ticks coalesced into this one.
	Missed int    `json:"missed,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Scheduler names the process that handled the tick.
	Scheduler string `json:"scheduler,omitempty"`
}

// Outcomes of a tick.
const (
	OutcomeSubmitted = "submitted"
	OutcomeUpToDate  = "up-to-date"
	OutcomeOverlap   = "skipped-running" // the previous run is still running
	OutcomeMissed    = "skipped-missed"  // policy skip
	OutcomeError     = "error"
)

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,99}$`)

// ErrNoSchedule is returned for an unknown schedule name.
var ErrNoSchedule = errors.New("no such schedule")

// ParseCron parses a cron expression (see the package documentation).
func ParseCron(expr string) (cron.Schedule, error) {
	s, err := cron.ParseStandard(expr)
	if err != nil {
		return nil, fmt.Errorf("cron %q: %w", expr, err)
	}
	return s, nil
}

// Validate checks a schedule and its spec file (which must load and expand).
func (s *Schedule) Validate() error {
	if !nameRE.MatchString(s.Name) {
		return fmt.Errorf("invalid schedule name %q (lower-case letters, digits, '.', '_', '-')", s.Name)
	}
	if _, err := ParseCron(s.Cron); err != nil {
		return err
	}
	switch s.Missed {
	case MissedRunOnce, MissedSkip:
	default:
		return fmt.Errorf("missed-tick policy %q: want %s or %s", s.Missed, MissedRunOnce, MissedSkip)
	}
	_, _, err := s.Graph()
	return err
}

// Graph loads the spec file with the overrides and expands it.
func (s *Schedule) Graph() (*spec.Graph, []byte, error) {
	text, err := os.ReadFile(s.SpecFile)
	if err != nil {
		return nil, nil, fmt.Errorf("schedule %s: %w", s.Name, err)
	}
	sp, err := spec.Parse(text, s.SpecFile, filepath.Dir(s.SpecFile), s.Overrides...)
	if err != nil {
		return nil, nil, err
	}
	g, err := sp.Expand()
	return g, text, err
}

// Store keeps schedules in Redis: a hash of definitions, a hash of states
// and a short history per schedule, under the namespace.
type Store struct {
	rdb redis.UniversalClient
	ns  string
	now func() time.Time
}

// NewStore returns the schedules of namespace ns.
func NewStore(rdb redis.UniversalClient, ns string) *Store {
	return &Store{rdb: rdb, ns: ns, now: time.Now}
}

// HistoryLength is how many events a schedule keeps.
const HistoryLength = 100

func (st *Store) defsKey() string               { return st.ns + ":schedules" }
func (st *Store) statesKey() string             { return st.ns + ":schedules:state" }
func (st *Store) historyKey(name string) string { return st.ns + ":schedules:history:" + name }
func (st *Store) claimKey(name string, tick time.Time) string {
	return fmt.Sprintf("%s:schedules:tick:%s:%d", st.ns, name, tick.Unix())
}

// Add creates a schedule; its first tick is the first one after now. The
// spec file path is made absolute.
func (st *Store) Add(ctx context.Context, s Schedule) error {
	if s.Missed == "" {
		s.Missed = MissedRunOnce
	}
	abs, err := filepath.Abs(s.SpecFile)
	if err != nil {
		return err
	}
	s.SpecFile = abs
	if err := s.Validate(); err != nil {
		return err
	}
	s.Created = st.now().UTC()
	b, _ := json.Marshal(s)
	ok, err := st.rdb.HSetNX(ctx, st.defsKey(), s.Name, b).Result()
	if err != nil {
		return fmt.Errorf("adding schedule %s: %w", s.Name, err)
	}
	if !ok {
		return fmt.Errorf("schedule %s exists (nerflow schedule rm %s first)", s.Name, s.Name)
	}
	state, _ := json.Marshal(State{LastTick: s.Created})
	if err := st.rdb.HSet(ctx, st.statesKey(), s.Name, state).Err(); err != nil {
		return fmt.Errorf("adding schedule %s: %w", s.Name, err)
	}
	return nil
}

// Get returns schedule name and its state.
func (st *Store) Get(ctx context.Context, name string) (*Schedule, *State, error) {
	vals, err := st.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.HGet(ctx, st.defsKey(), name)
		p.HGet(ctx, st.statesKey(), name)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, nil, fmt.Errorf("reading schedule %s: %w", name, err)
	}
	def, _ := vals[0].(*redis.StringCmd).Result()
	if def == "" {
		return nil, nil, fmt.Errorf("schedule %s: %w", name, ErrNoSchedule)
	}
	var s Schedule
	if err := json.Unmarshal([]byte(def), &s); err != nil {
		return nil, nil, fmt.Errorf("schedule %s: %w", name, err)
	}
	var state State
	if b, _ := vals[1].(*redis.StringCmd).Result(); b != "" {
		if err := json.Unmarshal([]byte(b), &state); err != nil {
			return nil, nil, fmt.Errorf("schedule %s state: %w", name, err)
		}
	}
	return &s, &state, nil
}

// Entry is a schedule with its state, as List returns them.
type Entry struct {
	Schedule
	State State `json:"state"`
	// Next is the next tick (zero when paused).
	Next time.Time `json:"next,omitempty"`
}

// List returns every schedule by name.
func (st *Store) List(ctx context.Context) ([]Entry, error) {
	defs, err := st.rdb.HGetAll(ctx, st.defsKey()).Result()
	if err != nil {
		return nil, fmt.Errorf("listing schedules: %w", err)
	}
	states, err := st.rdb.HGetAll(ctx, st.statesKey()).Result()
	if err != nil {
		return nil, fmt.Errorf("listing schedules: %w", err)
	}
	var out []Entry
	for name, def := range defs {
		var e Entry
		if err := json.Unmarshal([]byte(def), &e.Schedule); err != nil {
			return nil, fmt.Errorf("schedule %s: %w", name, err)
		}
		if b := states[name]; b != "" {
			_ = json.Unmarshal([]byte(b), &e.State)
		}
		if c, err := ParseCron(e.Cron); err == nil && !e.Paused {
			e.Next = c.Next(maxTime(e.State.LastTick, st.now()).UTC())
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Remove deletes schedule name, its state and history.
func (st *Store) Remove(ctx context.Context, name string) error {
	n, err := st.rdb.HDel(ctx, st.defsKey(), name).Result()
	if err != nil {
		return fmt.Errorf("removing schedule %s: %w", name, err)
	}
	if n == 0 {
		return fmt.Errorf("schedule %s: %w", name, ErrNoSchedule)
	}
	if err := st.rdb.HDel(ctx, st.statesKey(), name).Err(); err != nil {
		return fmt.Errorf("removing schedule %s: %w", name, err)
	}
	return st.rdb.Del(ctx, st.historyKey(name)).Err()
}

// Pause stops schedule name from firing; Resume starts it again from now
// (ticks that fell while paused are not caught up).
func (st *Store) Pause(ctx context.Context, name string) error { return st.setPaused(ctx, name, true) }

// Resume restarts a paused schedule.
func (st *Store) Resume(ctx context.Context, name string) error {
	return st.setPaused(ctx, name, false)
}

func (st *Store) setPaused(ctx context.Context, name string, paused bool) error {
	return st.rdb.Watch(ctx, func(tx *redis.Tx) error {
		def, err := tx.HGet(ctx, st.defsKey(), name).Result()
		if errors.Is(err, redis.Nil) {
			return fmt.Errorf("schedule %s: %w", name, ErrNoSchedule)
		}
		if err != nil {
			return err
		}
		var s Schedule
		if err := json.Unmarshal([]byte(def), &s); err != nil {
			return err
		}
		if s.Paused == paused {
			return nil
		}
		s.Paused = paused
		b, _ := json.Marshal(s)
		var state State
		if sb, err := tx.HGet(ctx, st.statesKey(), name).Result(); err == nil {
			_ = json.Unmarshal([]byte(sb), &state)
		}
		// Resuming starts from now: ticks that fell while paused are
		// not due.
		state.LastTick = st.now().UTC()
		sb, _ := json.Marshal(state)
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.HSet(ctx, st.defsKey(), name, b)
			if !paused {
				p.HSet(ctx, st.statesKey(), name, sb)
			}
			return nil
		})
		return err
	}, st.defsKey(), st.statesKey())
}

// History returns schedule name's latest events, newest first.
func (st *Store) History(ctx context.Context, name string, limit int) ([]Event, error) {
	if limit <= 0 || limit > HistoryLength {
		limit = HistoryLength
	}
	items, err := st.rdb.LRange(ctx, st.historyKey(name), 0, int64(limit-1)).Result()
	if err != nil {
		return nil, fmt.Errorf("reading history of %s: %w", name, err)
	}
	out := make([]Event, 0, len(items))
	for _, it := range items {
		var e Event
		if json.Unmarshal([]byte(it), &e) == nil {
			out = append(out, e)
		}
	}
	return out, nil
}

// errClaimLost says a tick's claim is no longer the recorder's.
var errClaimLost = errors.New("the tick's claim was taken over by another scheduler")

// record stores the outcome of a tick: an event in the history, and the
// new state unless a later tick was recorded meanwhile (a slow firing that
// finishes after another scheduler handled the next tick). It records only
// while token holds the tick's claim (a scheduler that stalled past its
// claim's lease records nothing: the one that took over does), and then
// keeps the claim for keep.
func (st *Store) record(ctx context.Context, name string, state State, ev Event, claimKey, token string, keep time.Duration) error {
	state.Last = &ev
	sb, _ := json.Marshal(state)
	eb, _ := json.Marshal(ev)
	txf := func(tx *redis.Tx) error {
		if holder, err := tx.Get(ctx, claimKey).Result(); err != nil && !errors.Is(err, redis.Nil) {
			return err
		} else if holder != token {
			return errClaimLost
		}
		var cur State
		if b, err := tx.HGet(ctx, st.statesKey(), name).Result(); err == nil {
			_ = json.Unmarshal([]byte(b), &cur)
		}
		newer := cur.LastTick.After(state.LastTick)
		_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			if !newer {
				p.HSet(ctx, st.statesKey(), name, sb)
			}
			p.LPush(ctx, st.historyKey(name), eb)
			p.LTrim(ctx, st.historyKey(name), 0, HistoryLength-1)
			p.PExpire(ctx, claimKey, keep)
			return nil
		})
		return err
	}
	var err error
	// Another schedule's tick recorded at the same moment fails the
	// transaction (one hash holds every state): try again.
	for range 10 {
		if err = st.rdb.Watch(ctx, txf, st.statesKey(), claimKey); !errors.Is(err, redis.TxFailedErr) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("recording tick of %s: %w", name, err)
	}
	return nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
