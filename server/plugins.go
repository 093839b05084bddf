package server

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"strings"

	"github.com/nerflow/nerflow/predict"
)

// listing answers GET of a plug-in's list as {key: [...]}, or 501 when the
// server was started without that plug-in.
func (s *Server) listing(key, missing string, available bool, list func(context.Context) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !available {
			writeError(w, http.StatusNotImplemented, "%s", missing)
			return
		}
		items, err := list(r.Context())
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{key: items})
	}
}

func (s *Server) listWorkers(w http.ResponseWriter, r *http.Request) {
	s.listing("workers", "this server has no worker registry", s.workers != nil, func(ctx context.Context) (any, error) {
		return s.workers.Workers(ctx)
	})(w, r)
}

func (s *Server) listSchedules(w http.ResponseWriter, r *http.Request) {
	s.listing("schedules", "this server has no schedules", s.schedules != nil, func(ctx context.Context) (any, error) {
		return s.schedules.Schedules(ctx)
	})(w, r)
}

func (s *Server) addSchedule(w http.ResponseWriter, r *http.Request) {
	if s.schedules == nil {
		writeError(w, http.StatusNotImplemented, "this server has no schedules")
		return
	}
	var req NewSchedule
	if !decodeBody(w, r, 64<<10, &req) {
		return
	}
	if err := s.schedules.AddSchedule(r.Context(), req); err != nil {
		// Validation (name, cron, the spec file and its expansion) is
		// the schedule store's; its errors are the submitter's to fix.
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]string{"schedule": req.Name})
}

func (s *Server) controlSchedule(w http.ResponseWriter, r *http.Request) {
	if s.schedules == nil {
		writeError(w, http.StatusNotImplemented, "this server has no schedules")
		return
	}
	name := r.PathValue("name")
	var err error
	switch r.PathValue("action") {
	case "pause":
		err = s.schedules.PauseSchedule(r.Context(), name)
	case "resume":
		err = s.schedules.ResumeSchedule(r.Context(), name)
	case "delete":
		err = s.schedules.RemoveSchedule(r.Context(), name)
	default:
		writeError(w, http.StatusNotFound, "no schedule action %q (pause, resume, delete)", r.PathValue("action"))
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"schedule": name, "done": r.PathValue("action")})
}

func (s *Server) scheduleHistory(w http.ResponseWriter, r *http.Request) {
	s.listing("ticks", "this server has no schedules", s.schedules != nil, func(ctx context.Context) (any, error) {
		return s.schedules.ScheduleHistory(ctx, r.PathValue("name"), 100)
	})(w, r)
}

func (s *Server) listModels(w http.ResponseWriter, r *http.Request) {
	s.listing("models", "this server has no model registry", s.models != nil, func(ctx context.Context) (any, error) {
		return s.models.Models(ctx)
	})(w, r)
}

func (s *Server) getModel(w http.ResponseWriter, r *http.Request) {
	if s.models == nil {
		writeError(w, http.StatusNotImplemented, "this server has no model registry")
		return
	}
	m, err := s.models.Model(r.Context(), r.PathValue("ref"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, m)
}

var tagRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

func (s *Server) promoteModel(w http.ResponseWriter, r *http.Request) {
	if s.models == nil {
		writeError(w, http.StatusNotImplemented, "this server has no model registry")
		return
	}
	var req struct {
		Tag string `json:"tag"`
	}
	if !decodeBody(w, r, 4096, &req) {
		return
	}
	if !tagRE.MatchString(req.Tag) {
		writeError(w, http.StatusBadRequest, "tag %q: want a name such as production or staging", req.Tag)
		return
	}
	if err := s.models.Promote(r.Context(), r.PathValue("ref"), req.Tag); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"model": r.PathValue("ref"), "tag": req.Tag})
}

// info tells the dashboard which parts this server has.
func (s *Server) info(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"workers": s.workers != nil, "schedules": s.schedules != nil, "models": s.models != nil,
		"predict": s.predictor != nil, "model": s.modelName, "logs": s.logs != nil, "metrics": s.metrics != nil,
		"queues": s.queues != nil,
	})
}

// predictRequest is POST /v1/predict: one of text, texts or tokens
// (pointers and nil slices tell a field left out from one given empty).
type predictRequest struct {
	// Model, when given, must be the name of the model this server serves.
	Model  string     `json:"model"`
	Text   *string    `json:"text"`
	Texts  []string   `json:"texts"`
	Tokens [][]string `json:"tokens"`
}

// maxPredictBody bounds a request (a few hundred sentences); a larger one
// gets a 413 (docs/serve.md).
const maxPredictBody = 1 << 20

const predictFields = `"text" (a string), "texts" (strings) or "tokens" (sentences as lists of tokens)`

func (s *Server) predict(w http.ResponseWriter, r *http.Request) {
	if s.predictor == nil {
		writeError(w, http.StatusNotImplemented, "this server serves no model (start it with --model)")
		return
	}
	var req predictRequest
	if !decodeBody(w, r, maxPredictBody, &req) {
		return
	}
	if req.Model != "" && req.Model != s.modelName {
		writeError(w, http.StatusNotFound, "this server serves model %q, not %q", s.modelName, req.Model)
		return
	}
	given := 0
	for _, g := range []bool{req.Text != nil, req.Texts != nil, req.Tokens != nil} {
		if g {
			given++
		}
	}
	var preq predict.Request
	switch {
	case given == 0:
		writeError(w, http.StatusBadRequest, "nothing to tag: give one of %s", predictFields)
		return
	case given > 1:
		writeError(w, http.StatusBadRequest, "give only one of %s", predictFields)
		return
	case req.Text != nil && strings.TrimSpace(*req.Text) == "":
		writeError(w, http.StatusBadRequest, `"text" is empty: give the text to tag, e.g. {"text": "John Smith flew to Paris."}`)
		return
	case req.Text != nil:
		preq.Texts = []string{*req.Text}
	case len(req.Texts) == 0 && req.Texts != nil:
		writeError(w, http.StatusBadRequest, `"texts" is empty: give at least one text`)
		return
	case req.Texts != nil:
		preq.Texts = req.Texts
	case len(req.Tokens) == 0:
		writeError(w, http.StatusBadRequest, `"tokens" is empty: give at least one sentence`)
		return
	default:
		preq.Sentences = req.Tokens
	}
	resp, err := s.predictor.Predict(r.Context(), preq)
	switch {
	case errors.Is(err, predict.ErrOverloaded):
		unavailable(w, "%v; try again in %d s", err, predictRetryAfter)
		return
	case errors.Is(err, predict.ErrNoModel):
		unavailable(w, "%v: the model is loading or its tag points nowhere", err)
		return
	case errors.Is(err, predict.ErrInvalid):
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	case err != nil:
		s.fail(w, r, err)
		return
	}
	if resp.Model.Version != "" {
		w.Header().Set(ModelVersionHeader, resp.Model.Version)
	}
	// Compact: an answer holds an object per token, and indenting them
	// doubles the bytes a big request gets back.
	writeCompactJSON(w, http.StatusOK, resp)
}
