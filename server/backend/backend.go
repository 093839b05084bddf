// Package backend adapts nerflow's operating packages (workers, the model
// registry, schedules, asynq's queues) to the small interfaces package
// server knows them by, shaped as the dashboard lists them. The CLI wires
// them into the server; the server itself imports none of those packages.
package backend

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nerflow/nerflow/pipeline/engine"
	"github.com/nerflow/nerflow/registry"
	"github.com/nerflow/nerflow/schedule"
	"github.com/nerflow/nerflow/server"
	"github.com/nerflow/nerflow/workers"
)

// NewWorkerList shows the live workers of package workers on the API.
func NewWorkerList(rdb redis.UniversalClient, ns string) server.Workers {
	return workerList{rdb: rdb, ns: ns}
}

type workerList struct {
	rdb redis.UniversalClient
	ns  string
}

// workerRow is one worker as the dashboard lists it.
type workerRow struct {
	Name        string    `json:"name"`
	Host        string    `json:"host"`
	Device      string    `json:"device"`
	Queues      []string  `json:"queues"`
	Busy        string    `json:"busy"`
	Utilization float64   `json:"utilization"`
	Version     string    `json:"version"`
	Started     time.Time `json:"started"`
	Running     []string  `json:"running"`
}

func (w workerList) Workers(ctx context.Context) (any, error) {
	ws, err := workers.List(ctx, w.rdb, w.ns)
	if err != nil {
		return nil, err
	}
	rows := make([]workerRow, 0, len(ws))
	for _, x := range ws {
		r := workerRow{Name: x.Name, Host: x.Host, Device: x.Device, Queues: x.Queues, Version: x.Version, Started: x.Started,
			Busy: fmt.Sprintf("%d/%d", len(x.Active), x.Concurrency), Utilization: x.Utilization(), Running: []string{}}
		for _, n := range x.Active {
			r.Running = append(r.Running, n.Run+"/"+n.Node)
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// NewModelRegistry shows a model registry on the API; listing it first
// registers the models of runs finished since the last look.
func NewModelRegistry(reg *registry.Registry) server.Models { return modelRegistry{reg} }

type modelRegistry struct{ reg *registry.Registry }

// modelRow is one registered version as the dashboard lists it.
type modelRow struct {
	Ref        string    `json:"ref"`
	Tags       []string  `json:"tags"`
	F1         *float64  `json:"f1"`
	Stage      string    `json:"stage"`
	Run        string    `json:"run"`
	Digest     string    `json:"digest"`
	Registered time.Time `json:"registered"`
}

// sync registers the models of the runs finished since the last look, so
// that what the API shows includes the run that just ended.
func (m modelRegistry) sync(ctx context.Context) error {
	_, err := m.reg.Sync(ctx)
	return err
}

func (m modelRegistry) Models(ctx context.Context) (any, error) {
	if err := m.sync(ctx); err != nil {
		return nil, err
	}
	ms, err := m.reg.Models(ctx)
	if err != nil {
		return nil, err
	}
	rows := []modelRow{}
	for _, model := range ms {
		vs, err := m.reg.Versions(ctx, model.Name)
		if err != nil {
			return nil, err
		}
		for i := len(vs) - 1; i >= 0; i-- {
			v := &vs[i]
			r := modelRow{Ref: v.Ref(), Tags: append([]string{}, registry.TagsOf(model.Tags, v.Version)...), Stage: v.Stage, Run: v.Run,
				Digest: engine.Short(strings.TrimPrefix(v.Model.Digest, "sha256:")), Registered: v.Registered}
			if len(v.Metrics) > 0 {
				f := v.Metrics[0].Micro.F1
				r.F1 = &f
			}
			rows = append(rows, r)
		}
	}
	return rows, nil
}

func (m modelRegistry) Model(ctx context.Context, ref string) (any, error) {
	if err := m.sync(ctx); err != nil {
		return nil, err
	}
	v, err := m.reg.Resolve(ctx, ref)
	return v, notFound(err)
}

func (m modelRegistry) Promote(ctx context.Context, ref, tag string) error {
	if err := m.sync(ctx); err != nil {
		return err
	}
	v, err := m.reg.Resolve(ctx, ref)
	if err != nil {
		return notFound(err)
	}
	return notFound(m.reg.Promote(ctx, v.Name, v.Version, tag))
}

// notFound marks the registry's lookup failures for a 404.
func notFound(err error) error {
	if errors.Is(err, registry.ErrNoModel) || errors.Is(err, registry.ErrNoVersion) || errors.Is(err, registry.ErrNoTag) {
		return fmt.Errorf("%w: %w", server.ErrNotFound, err)
	}
	return err
}

// NewScheduleList shows and controls the schedules of package schedule on
// the API.
func NewScheduleList(st *schedule.Store) server.Schedules { return scheduleList{st} }

type scheduleList struct{ st *schedule.Store }

// scheduleRow is one schedule as the dashboard lists it.
type scheduleRow struct {
	Name        string     `json:"name"`
	Cron        string     `json:"cron"`
	SpecFile    string     `json:"spec_file"`
	Overrides   []string   `json:"overrides"`
	Missed      string     `json:"missed"`
	Paused      bool       `json:"paused"`
	Next        *time.Time `json:"next"`
	LastRun     string     `json:"last_run"`
	LastSuccess string     `json:"last_success"`
	LastOutcome string     `json:"last_outcome"`
}

func (l scheduleList) Schedules(ctx context.Context) (any, error) {
	es, err := l.st.List(ctx)
	if err != nil {
		return nil, err
	}
	rows := make([]scheduleRow, 0, len(es))
	for _, e := range es {
		r := scheduleRow{Name: e.Name, Cron: e.Cron, SpecFile: e.SpecFile, Overrides: append([]string{}, e.Overrides...), Missed: e.Missed,
			Paused: e.Paused, LastRun: e.State.LastRun, LastSuccess: e.State.LastSuccess}
		if !e.Next.IsZero() {
			next := e.Next
			r.Next = &next
		}
		if ev := e.State.Last; ev != nil {
			r.LastOutcome = ev.Outcome
		}
		rows = append(rows, r)
	}
	return rows, nil
}

func (l scheduleList) AddSchedule(ctx context.Context, s server.NewSchedule) error {
	return l.st.Add(ctx, schedule.Schedule{Name: s.Name, Cron: s.Cron, SpecFile: s.SpecFile, Overrides: s.Set, Missed: s.Missed})
}

func (l scheduleList) PauseSchedule(ctx context.Context, name string) error {
	return scheduleNotFound(l.st.Pause(ctx, name))
}

func (l scheduleList) ResumeSchedule(ctx context.Context, name string) error {
	return scheduleNotFound(l.st.Resume(ctx, name))
}

func (l scheduleList) RemoveSchedule(ctx context.Context, name string) error {
	return scheduleNotFound(l.st.Remove(ctx, name))
}

func (l scheduleList) ScheduleHistory(ctx context.Context, name string, limit int) (any, error) {
	if _, _, err := l.st.Get(ctx, name); err != nil {
		return nil, scheduleNotFound(err)
	}
	evs, err := l.st.History(ctx, name, limit)
	if evs == nil {
		evs = []schedule.Event{}
	}
	return evs, err
}

func (l scheduleList) RunSchedules(ctx context.Context) (map[string]string, error) {
	es, err := l.st.List(ctx)
	if err != nil {
		return nil, err
	}
	by := map[string]string{}
	for _, e := range es {
		evs, err := l.st.History(ctx, e.Name, schedule.HistoryLength)
		if err != nil {
			return nil, err
		}
		for _, ev := range evs {
			if ev.Outcome == schedule.OutcomeSubmitted && ev.Run != "" {
				by[ev.Run] = e.Name
			}
		}
	}
	return by, nil
}

func scheduleNotFound(err error) error {
	if errors.Is(err, schedule.ErrNoSchedule) {
		return fmt.Errorf("%w: %w", server.ErrNotFound, err)
	}
	return err
}
