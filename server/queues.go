package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
)

// Queues shows nerflow's task queues (asynq's, one per spec queue) and the
// tasks they archived: node executions that failed for good. Retrying one
// is retrying its run (POST /api/v1/runs/{id}/retry), which re-runs the
// run's failed nodes through the engine; asynq's own retry of an archived
// task would find its node failed and do nothing.
type Queues interface {
	Queues(ctx context.Context) (any, error)
	// Archived lists up to limit archived tasks of queue (cpu or gpu).
	Archived(ctx context.Context, queue string, limit int) (any, error)
	// DeleteArchived deletes an archived task (its record only: the
	// run's state does not change).
	DeleteArchived(ctx context.Context, queue, task string) error
}

// ErrNotArchived, wrapped by Queues.DeleteArchived, makes a 409: the task
// is live, not archived.
var ErrNotArchived = errors.New("not archived")

// WithQueues serves /api/v1/queues.
func WithQueues(q Queues) Option { return func(s *Server) { s.queues = q } }

// SpecQueues returns the queues a spec's nodes name.
func SpecQueues() []string { return []string{"cpu", "gpu"} }

func validQueue(q string) error {
	if slices.Contains(SpecQueues(), q) {
		return nil
	}
	return fmt.Errorf("%w: queue %q (nerflow's queues are cpu and gpu)", ErrNotFound, q)
}

func (s *Server) listQueues(w http.ResponseWriter, r *http.Request) {
	s.listing("queues", "this server has no queue inspector", s.queues != nil, s.queueList)(w, r)
}

func (s *Server) queueList(ctx context.Context) (any, error) { return s.queues.Queues(ctx) }

func (s *Server) listArchived(w http.ResponseWriter, r *http.Request) {
	q := r.PathValue("queue")
	s.listing("tasks", "this server has no queue inspector", s.queues != nil, func(ctx context.Context) (any, error) {
		if err := validQueue(q); err != nil {
			return nil, err
		}
		return s.queues.Archived(ctx, q, 100)
	})(w, r)
}

// deleteArchived is POST /api/v1/queues/{queue}/archived/delete {"id": TASK}
// (task ids hold slashes: RUN/NODE).
func (s *Server) deleteArchived(w http.ResponseWriter, r *http.Request) {
	if s.queues == nil {
		writeError(w, http.StatusNotImplemented, "this server has no queue inspector")
		return
	}
	q := r.PathValue("queue")
	if err := validQueue(q); err != nil {
		s.fail(w, r, err)
		return
	}
	var req struct {
		ID string `json:"id"`
	}
	if !decodeBody(w, r, 4096, &req) {
		return
	}
	if req.ID == "" {
		writeError(w, http.StatusBadRequest, `give the task as {"id": "RUN/NODE"}`)
		return
	}
	if err := s.queues.DeleteArchived(r.Context(), q, req.ID); err != nil {
		if errors.Is(err, ErrNotArchived) {
			writeError(w, http.StatusConflict, "%v: only archived tasks are deleted", err)
			return
		}
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"deleted": req.ID})
}
