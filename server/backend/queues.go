package backend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/nerflow/nerflow/pipeline/engine"
	"github.com/nerflow/nerflow/server"
)

// NewQueueInspector inspects the asynq queues of namespace ns.
func NewQueueInspector(rdb redis.UniversalClient, ns string) server.Queues {
	return queueInspector{insp: asynq.NewInspectorFromRedisClient(rdb), ns: ns}
}

type queueInspector struct {
	insp *asynq.Inspector
	ns   string
}

// queueRow is one queue as the dashboard shows it.
type queueRow struct {
	Name      string `json:"name"`
	Size      int    `json:"size"`
	Pending   int    `json:"pending"`
	Active    int    `json:"active"`
	Scheduled int    `json:"scheduled"`
	Retry     int    `json:"retry"`
	Archived  int    `json:"archived"`
	Completed int    `json:"completed"`
	// ProcessedToday and FailedToday count since midnight UTC.
	ProcessedToday int  `json:"processed_today"`
	FailedToday    int  `json:"failed_today"`
	Paused         bool `json:"paused"`
	// LatencySeconds is how long the oldest pending task has waited.
	LatencySeconds float64 `json:"latency_seconds"`
}

func (qi queueInspector) Queues(context.Context) (any, error) {
	// One listing of asynq's queues serves both spec queues.
	known, err := qi.known()
	if err != nil {
		return nil, err
	}
	rows := make([]queueRow, 0, len(server.SpecQueues()))
	for _, q := range server.SpecQueues() {
		if !slices.Contains(known, qi.ns+":"+q) {
			rows = append(rows, queueRow{Name: q})
			continue
		}
		info, err := qi.insp.GetQueueInfo(qi.ns + ":" + q)
		if err != nil {
			return nil, fmt.Errorf("queue %s: %w", q, err)
		}
		rows = append(rows, queueRow{Name: q, Size: info.Size, Pending: info.Pending, Active: info.Active, Scheduled: info.Scheduled,
			Retry: info.Retry, Archived: info.Archived, Completed: info.Completed, ProcessedToday: info.Processed,
			FailedToday: info.Failed, Paused: info.Paused, LatencySeconds: info.Latency.Seconds()})
	}
	return rows, nil
}

// archivedRow is one archived task: the node execution it was and why it
// failed.
type archivedRow struct {
	ID       string     `json:"id"`
	Run      string     `json:"run"`
	Node     string     `json:"node"`
	Error    string     `json:"error"`
	FailedAt *time.Time `json:"failed_at"`
	Attempts int        `json:"attempts"`
}

// exists tells whether asynq knows queue: it does once a task was
// enqueued to it, and its errors for one it does not know are no
// ErrQueueNotFound.
func (qi queueInspector) exists(queue string) (bool, error) {
	known, err := qi.known()
	return slices.Contains(known, qi.ns+":"+queue), err
}

// known lists the queues asynq knows, namespaced.
func (qi queueInspector) known() ([]string, error) {
	known, err := qi.insp.Queues()
	if err != nil {
		return nil, fmt.Errorf("listing queues: %w", err)
	}
	return known, nil
}

func (qi queueInspector) Archived(_ context.Context, queue string, limit int) (any, error) {
	if ok, err := qi.exists(queue); err != nil || !ok {
		return []archivedRow{}, err
	}
	ts, err := qi.insp.ListArchivedTasks(qi.ns+":"+queue, asynq.PageSize(limit))
	if err != nil {
		return nil, fmt.Errorf("archived tasks of queue %s: %w", queue, err)
	}
	rows := make([]archivedRow, 0, len(ts))
	for _, t := range ts {
		// The engine marks final failures SkipRetry; asynq keeps that in
		// the message, which says nothing the queue view does not.
		r := archivedRow{ID: t.ID, Error: strings.TrimPrefix(t.LastErr, asynq.SkipRetry.Error()+": "), Attempts: t.Retried + 1}
		if t.Type == engine.TaskType {
			var p struct{ Run, Node string }
			if json.Unmarshal(t.Payload, &p) == nil {
				r.Run, r.Node = p.Run, p.Node
			}
		}
		if !t.LastFailedAt.IsZero() {
			at := t.LastFailedAt
			r.FailedAt = &at
		}
		rows = append(rows, r)
	}
	return rows, nil
}

func (qi queueInspector) DeleteArchived(_ context.Context, queue, task string) error {
	qname := qi.ns + ":" + queue
	if ok, err := qi.exists(queue); err != nil || !ok {
		if err != nil {
			return err
		}
		return fmt.Errorf("%w: task %s in queue %s", server.ErrNotFound, task, queue)
	}
	info, err := qi.insp.GetTaskInfo(qname, task)
	switch {
	case errors.Is(err, asynq.ErrTaskNotFound), errors.Is(err, asynq.ErrQueueNotFound):
		return fmt.Errorf("%w: task %s in queue %s", server.ErrNotFound, task, queue)
	case err != nil:
		return fmt.Errorf("task %s: %w", task, err)
	case info.State != asynq.TaskStateArchived:
		// Deleting a live task would lose a node's execution.
		return fmt.Errorf("%w: task %s is %s", server.ErrNotArchived, task, info.State)
	}
	if err := qi.insp.DeleteTask(qname, task); err != nil && !errors.Is(err, asynq.ErrTaskNotFound) {
		return fmt.Errorf("deleting task %s: %w", task, err)
	}
	return nil
}
