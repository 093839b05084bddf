// Package server is nerflow's HTTP face, served by `nerflow serve`: a JSON
// API over runs (submit, list, status, cancel, retry; nodes with their
// progress and logs; artifact downloads), workers, schedules and models,
// POST /v1/predict, Prometheus metrics, and a dashboard whose assets are
// embedded in the binary (it works offline).
//
// The package drives the engine through Runs (whose values are the
// engine's run types) and knows the workers, the schedules, the model
// registry, asynq's queues and the predictor only by the small interfaces
// below: *engine.Engine and the predictor satisfy theirs directly, package
// server/backend adapts the others, and the CLI wires them in
// (imports_test.go keeps it so). Every endpoint but GET /healthz needs the
// bearer token of the configuration (or the dashboard's session cookie,
// derived from it); the token itself is never logged nor sent back.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nerflow/nerflow/pipeline/engine"
	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/predict"
	"github.com/nerflow/nerflow/storage"
)

// Runs is what the API needs of the engine (*engine.Engine has it all).
type Runs interface {
	Submit(ctx context.Context, g *spec.Graph, opts engine.SubmitOptions) (string, error)
	Runs(ctx context.Context, limit int) ([]engine.RunSummary, error)
	Status(ctx context.Context, id string) (*engine.RunStatus, error)
	RunManifest(ctx context.Context, id string) (*engine.RunManifest, error)
	Cancel(ctx context.Context, id, reason string) error
	Retry(ctx context.Context, id string) (int, error)
	Store() storage.Store
}

// NodeLogs reads the last log lines of a node.
type NodeLogs interface {
	NodeLogs(ctx context.Context, run, node string, limit int) ([]json.RawMessage, error)
}

// Workers lists the live workers.
type Workers interface {
	Workers(ctx context.Context) (any, error)
}

// Schedules lists, adds and controls schedules.
type Schedules interface {
	Schedules(ctx context.Context) (any, error)
	AddSchedule(ctx context.Context, s NewSchedule) error
	PauseSchedule(ctx context.Context, name string) error
	ResumeSchedule(ctx context.Context, name string) error
	RemoveSchedule(ctx context.Context, name string) error
	// ScheduleHistory lists a schedule's latest ticks, newest first.
	ScheduleHistory(ctx context.Context, name string, limit int) (any, error)
	// RunSchedules maps the runs the schedules submitted (as far as their
	// tick histories go) to the schedule's name.
	RunSchedules(ctx context.Context) (map[string]string, error)
}

// NewSchedule is POST /api/v1/schedules.
type NewSchedule struct {
	Name string `json:"name"`
	Cron string `json:"cron"`
	// SpecFile is a path on the machines of the API and the schedulers,
	// read at every tick (as `nerflow schedule add` records it).
	SpecFile string   `json:"spec_file"`
	Set      []string `json:"set"`
	// Missed is the missed-tick policy: run-once (default) or skip.
	Missed string `json:"missed"`
}

// Models lists, shows and promotes registered models; refs are
// NAME@VERSION.
type Models interface {
	Models(ctx context.Context) (any, error)
	Model(ctx context.Context, ref string) (any, error)
	Promote(ctx context.Context, ref, tag string) error
}

// Predictor answers /v1/predict.
type Predictor interface {
	Predict(ctx context.Context, req predict.Request) (*predict.Response, error)
}

// ErrNotFound, wrapped by an implementation, makes a 404.
var ErrNotFound = errors.New("not found")

// Server is the HTTP handler of `nerflow serve`.
type Server struct {
	runs      Runs
	token     string
	session   string // cookie value: HMAC of the token
	log       *slog.Logger
	specDir   string
	logs      NodeLogs
	workers   Workers
	schedules Schedules
	models    Models
	predictor Predictor
	queues    Queues
	modelName string
	metrics   http.Handler
	mux       *http.ServeMux

	graphs       sync.Map // run id -> *graphView (a run's graph never changes)
	cachedGraphs atomic.Int64

	maxBody   int64
	authLimit *authLimiter
}

// Option configures a Server.
type Option func(*Server)

// WithLogger sets the logger of requests and failures.
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = l } }

// WithSpecDir is the base of relative local dataset paths in specs
// submitted over HTTP (default: the working directory): they are read by
// this process, as `nerflow submit` reads them on the submitting machine.
func WithSpecDir(dir string) Option { return func(s *Server) { s.specDir = dir } }

// WithNodeLogs serves nodes' logs.
func WithNodeLogs(l NodeLogs) Option { return func(s *Server) { s.logs = l } }

// WithWorkers serves /api/v1/workers.
func WithWorkers(w Workers) Option { return func(s *Server) { s.workers = w } }

// WithSchedules serves /api/v1/schedules.
func WithSchedules(sc Schedules) Option { return func(s *Server) { s.schedules = sc } }

// WithModels serves /api/v1/models.
func WithModels(m Models) Option { return func(s *Server) { s.models = m } }

// WithPredictor serves POST /v1/predict with the model named name.
func WithPredictor(p Predictor, name string) Option {
	return func(s *Server) { s.predictor, s.modelName = p, name }
}

// WithMetrics mounts a Prometheus handler at /metrics.
func WithMetrics(h http.Handler) Option { return func(s *Server) { s.metrics = h } }

// New returns the server. token is required: there is no anonymous mode.
func New(runs Runs, token string, opts ...Option) (*Server, error) {
	if len(token) < 16 {
		return nil, errors.New("serve.token: a bearer token of at least 16 characters is required (set serve.token in nerflow.yaml or NERFLOW_SERVE_TOKEN)")
	}
	s := &Server{runs: runs, token: token, session: sessionValue(token), log: slog.Default(), specDir: ".", mux: http.NewServeMux(),
		maxBody: DefaultMaxBody, authLimit: newAuthLimiter(DefaultAuthFailures, DefaultAuthWindow)}
	for _, o := range opts {
		o(s)
	}
	s.routes()
	return s, nil
}

func (s *Server) routes() {
	m := s.mux
	m.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	m.HandleFunc("GET /login", s.loginPage)
	m.HandleFunc("POST /login", s.login)
	m.HandleFunc("POST /logout", s.logout)

	api := func(pattern string, h http.HandlerFunc) { m.Handle(pattern, s.auth(h, false)) }
	api("GET /api/v1/runs", s.listRuns)
	api("POST /api/v1/runs", s.submitRun)
	api("GET /api/v1/runs/{id}", s.getRun)
	api("POST /api/v1/runs/{id}/cancel", s.cancelRun)
	api("POST /api/v1/runs/{id}/retry", s.retryRun)
	api("GET /api/v1/runs/{id}/nodes/{node}", s.getNode)
	api("GET /api/v1/runs/{id}/nodes/{node}/logs", s.getNodeLogs)
	api("GET /api/v1/runs/{id}/nodes/{node}/outputs/{output}/files/{file...}", s.download)
	api("GET /api/v1/workers", s.listWorkers)
	api("GET /api/v1/schedules", s.listSchedules)
	api("POST /api/v1/schedules", s.addSchedule)
	api("POST /api/v1/schedules/{name}/{action}", s.controlSchedule)
	api("GET /api/v1/schedules/{name}/history", s.scheduleHistory)
	api("GET /api/v1/models", s.listModels)
	api("GET /api/v1/models/{ref}", s.getModel)
	api("POST /api/v1/models/{ref}/promote", s.promoteModel)
	api("GET /api/v1/queues", s.listQueues)
	api("GET /api/v1/queues/{queue}/archived", s.listArchived)
	api("POST /api/v1/queues/{queue}/archived/delete", s.deleteArchived)
	api("GET /api/v1/info", s.info)
	api("POST /v1/predict", s.predict)
	if s.metrics != nil {
		m.Handle("GET /metrics", s.auth(s.metrics.ServeHTTP, false))
	}
	s.dashboardRoutes()
}

// ServeHTTP logs each request (method, path, status, duration: never a
// header) and dispatches it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	// A route's handler runs through the mux, which sets the path values.
	if !s.limit(rec, r) {
		// refused: too large
	} else if miss, ok := s.unrouted(r); ok {
		jsonMiss(miss).ServeHTTP(rec, r)
	} else {
		s.mux.ServeHTTP(rec, r)
	}
	lvl := slog.LevelDebug
	if rec.status >= 500 && rec.status != http.StatusServiceUnavailable && rec.status != http.StatusNotImplemented {
		lvl = slog.LevelWarn
	}
	s.log.Log(r.Context(), lvl, "http", "method", r.Method, "path", r.URL.Path, "status", rec.status,
		"took", time.Since(start).Round(time.Microsecond))
}

// isAPI tells the paths whose every answer, errors included, is JSON.
func isAPI(p string) bool {
	return strings.HasPrefix(p, "/api/") || strings.HasPrefix(p, "/v1/") || p == "/healthz" || p == "/metrics"
}

// unrouted returns the mux's answer to an API request that no route
// takes. Pages and static files are not looked up twice: their misses
// keep the mux's plain answer.
func (s *Server) unrouted(r *http.Request) (http.Handler, bool) {
	if !isAPI(r.URL.Path) {
		return nil, false
	}
	miss, pattern := s.mux.Handler(r)
	return miss, pattern == ""
}

// jsonMiss answers, in JSON, a request that no route takes: miss is the
// mux's own answer (404, or 405 with the Allow header), whose plain-text
// body is dropped.
func jsonMiss(miss http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		probe := &headerProbe{header: http.Header{}, status: http.StatusOK}
		miss.ServeHTTP(probe, r)
		what := "no such endpoint"
		if allow := probe.header.Get("Allow"); allow != "" {
			w.Header().Set("Allow", allow)
			what = "method not allowed (allowed: " + allow + ")"
		}
		writeError(w, probe.status, "%s %s: %s (see docs/serve.md)", r.Method, r.URL.Path, what)
	})
}

// headerProbe is a ResponseWriter that keeps the status and headers of an
// answer and drops its body.
type headerProbe struct {
	header http.Header
	status int
}

func (p *headerProbe) Header() http.Header         { return p.header }
func (p *headerProbe) Write(b []byte) (int, error) { return len(b), nil }
func (p *headerProbe) WriteHeader(code int)        { p.status = code }

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// Flush lets streamed responses through the recorder.
func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the writer underneath.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func writeJSON(w http.ResponseWriter, status int, v any) { encodeJSON(w, status, v, "  ") }

// writeCompactJSON is writeJSON without indentation, for large answers.
func writeCompactJSON(w http.ResponseWriter, status int, v any) { encodeJSON(w, status, v, "") }

func encodeJSON(w http.ResponseWriter, status int, v any, indent string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", indent)
	_ = enc.Encode(v)
}

// apiError is every error body.
type apiError struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, status int, format string, args ...any) {
	writeJSON(w, status, apiError{Error: fmt.Sprintf(format, args...)})
}

// fail maps an error of the engine or a plug-in to its status.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, engine.ErrNoRun), errors.Is(err, ErrNotFound), errors.Is(err, storage.ErrNotFound):
		writeError(w, http.StatusNotFound, "%v", err)
	case errors.Is(err, context.Canceled):
		writeError(w, 499, "%v", err)
	default:
		s.log.Warn("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeError(w, http.StatusInternalServerError, "%v", err)
	}
}

// decodeOptionalBody is decodeBody for a body that may be absent.
func decodeOptionalBody(w http.ResponseWriter, r *http.Request, limit int64, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		writeError(w, http.StatusBadRequest, "request body: %v", err)
		return false
	}
	return true
}

// decodeBody reads a JSON body of at most limit bytes into v.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "request body over %d bytes", limit)
			return false
		}
		writeError(w, http.StatusBadRequest, "request body: %v", err)
		return false
	}
	return true
}
