package server

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/nerflow/nerflow/pipeline/engine"
	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/stages"
)

// graphNode is a node of a run's DAG as the dashboard draws it.
type graphNode struct {
	ID      string         `json:"id"`
	Name    string         `json:"name"`
	Stage   string         `json:"stage"`
	Queue   string         `json:"queue"`
	FanOut  map[string]any `json:"fan_out,omitempty"`
	Parents []string       `json:"parents"`
	// Ports are the input ports the node is given something on (the
	// dashboard draws a dev F1 line for a training given a dev set).
	Ports []string `json:"ports,omitempty"`
}

const maxCachedGraphs = 512

// graphView is the immutable part of a run: its DAG and spec.
type graphView struct {
	Nodes     []graphNode `json:"nodes"`
	Spec      string      `json:"spec,omitempty"`
	SpecFile  string      `json:"spec_file,omitempty"`
	Overrides []string    `json:"overrides,omitempty"`
}

// runView is GET /api/v1/runs/{id}.
type runView struct {
	*engine.RunStatus
	Graph *graphView `json:"graph"`
}

func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) {
	limit := 100
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeError(w, http.StatusBadRequest, "limit %q: want a positive integer", v)
			return
		}
		limit = n
	}
	runs, err := s.runs.Runs(r.Context(), limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// Which schedule submitted a run, as far as the schedules' histories
	// go: a missing answer leaves the column empty, not the list.
	var by map[string]string
	if s.schedules != nil {
		if by, err = s.schedules.RunSchedules(r.Context()); err != nil {
			s.log.Warn("reading which schedule submitted which run", "err", err)
		}
	}
	rows := make([]runRow, len(runs))
	for i, run := range runs {
		rows[i] = runRow{RunSummary: run, Schedule: by[run.ID]}
	}
	writeJSON(w, http.StatusOK, map[string]any{"runs": rows})
}

// runRow is a run as GET /api/v1/runs lists it.
type runRow struct {
	engine.RunSummary
	// Schedule names the schedule that submitted the run.
	Schedule string `json:"schedule,omitempty"`
}

// submitRequest is POST /api/v1/runs.
type submitRequest struct {
	// Spec is the YAML text of a pipeline spec.
	Spec string `json:"spec"`
	// File names it in messages and in the run's record.
	File string `json:"file"`
	// Set are overrides, as `nerflow submit --set`.
	Set []string `json:"set"`
}

func (s *Server) submitRun(w http.ResponseWriter, r *http.Request) {
	var req submitRequest
	if !decodeBody(w, r, 1<<20, &req) {
		return
	}
	if strings.TrimSpace(req.Spec) == "" {
		writeError(w, http.StatusBadRequest, "spec: the YAML text of a pipeline spec is required")
		return
	}
	if req.File == "" {
		req.File = "api.yaml"
	}
	sp, err := spec.Parse([]byte(req.Spec), req.File, s.specDir, req.Set...)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	g, err := sp.Expand()
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	id, err := s.runs.Submit(r.Context(), g, engine.SubmitOptions{Spec: []byte(req.Spec), SpecFile: req.File, Overrides: req.Set})
	if err != nil {
		if id == "" {
			// Nothing was created: a dataset that cannot be imported is
			// the submitter's to fix.
			writeError(w, http.StatusBadRequest, "%v", err)
			return
		}
		s.fail(w, r, err)
		return
	}
	s.log.Info("run submitted over http", "run", id, "name", g.Name)
	writeJSON(w, http.StatusCreated, map[string]any{"id": id, "name": g.Name, "nodes": len(g.Nodes)})
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	st, err := s.runs.Status(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	g, err := s.graph(r, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, runView{RunStatus: st, Graph: g})
}

// graph returns run id's DAG, read once from its manifest.
func (s *Server) graph(r *http.Request, id string) (*graphView, error) {
	if g, ok := s.graphs.Load(id); ok {
		return g.(*graphView), nil
	}
	if s.cachedGraphs.Add(1) > maxCachedGraphs {
		// A long-lived server sees many runs: start over, reload on demand.
		s.graphs.Clear()
		s.cachedGraphs.Store(1)
	}
	m, err := s.runs.RunManifest(r.Context(), id)
	if err != nil {
		return nil, fmt.Errorf("reading the graph of run %s: %w", id, err)
	}
	g := &graphView{Spec: m.Spec, SpecFile: m.SpecFile, Overrides: m.Overrides, Nodes: []graphNode{}}
	if m.Graph != nil {
		for _, n := range m.Graph.Nodes {
			parents := n.Parents
			if parents == nil {
				parents = []string{}
			}
			gn := graphNode{ID: n.ID, Name: n.Name, Stage: n.Stage, Queue: n.Queue, FanOut: n.FanOut, Parents: parents}
			for _, in := range n.Inputs {
				if !slices.Contains(gn.Ports, in.Port) {
					gn.Ports = append(gn.Ports, in.Port)
				}
			}
			g.Nodes = append(g.Nodes, gn)
		}
	}
	s.graphs.Store(id, g)
	return g, nil
}

func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Reason string `json:"reason"`
	}
	if !decodeOptionalBody(w, r, 4096, &req) {
		return
	}
	id := r.PathValue("id")
	if req.Reason == "" {
		req.Reason = "cancelled from the API"
	}
	if err := s.runs.Cancel(r.Context(), id, req.Reason); err != nil {
		s.controlFailed(w, r, id, err, func(state string) bool { return state != engine.Running })
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"id": id, "state": engine.Cancelled})
}

func (s *Server) retryRun(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	n, err := s.runs.Retry(r.Context(), id)
	if err != nil {
		s.controlFailed(w, r, id, err, func(state string) bool { return state == engine.Running || state == engine.Succeeded })
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "nodes": n})
}

// controlFailed answers a cancel or retry that failed: 409 when the run's
// state is one the action does not apply to (conflict says which), else
// what the error is.
func (s *Server) controlFailed(w http.ResponseWriter, r *http.Request, id string, err error, conflict func(state string) bool) {
	if !errors.Is(err, engine.ErrNoRun) {
		if st, serr := s.runs.Status(r.Context(), id); serr == nil && conflict(st.State) {
			writeError(w, http.StatusConflict, "%v", err)
			return
		}
	}
	s.fail(w, r, err)
}

// node finds a node of a run, answering 404 itself.
func (s *Server) node(w http.ResponseWriter, r *http.Request) (*engine.NodeStatus, bool) {
	st, err := s.runs.Status(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return nil, false
	}
	n, ok := st.Node(r.PathValue("node"))
	if !ok {
		writeError(w, http.StatusNotFound, "run %s has no node %q", st.ID, r.PathValue("node"))
		return nil, false
	}
	return n, true
}

// nodeView is GET /api/v1/runs/{id}/nodes/{node}.
type nodeView struct {
	*engine.NodeStatus
	DurationSeconds float64 `json:"duration_seconds"`
}

func (s *Server) getNode(w http.ResponseWriter, r *http.Request) {
	n, ok := s.node(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, nodeView{NodeStatus: n, DurationSeconds: n.Duration().Seconds()})
}

func (s *Server) getNodeLogs(w http.ResponseWriter, r *http.Request) {
	n, ok := s.node(w, r)
	if !ok {
		return
	}
	if s.logs == nil {
		writeError(w, http.StatusNotImplemented, "this server keeps no node logs")
		return
	}
	limit := 200
	if v, err := strconv.Atoi(r.URL.Query().Get("limit")); err == nil && v > 0 {
		limit = min(v, 5000)
	}
	lines, err := s.logs.NodeLogs(r.Context(), r.PathValue("id"), n.ID, limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"node": n.ID, "lines": lines})
}

// download streams one file of a node's output, verified against the
// artifact's manifest as it is read.
func (s *Server) download(w http.ResponseWriter, r *http.Request) {
	n, ok := s.node(w, r)
	if !ok {
		return
	}
	out, file := r.PathValue("output"), r.PathValue("file")
	art, ok := n.Outputs[out]
	if !ok {
		writeError(w, http.StatusNotFound, "node %s has no output %q (outputs: %s)", n.ID, out, strings.Join(n.OutputNames(), ", "))
		return
	}
	f, ok := art.File(file)
	if !ok {
		writeError(w, http.StatusNotFound, "output %s of node %s has no file %q", out, n.ID, file)
		return
	}
	rc, err := stages.NewInput(r.Context(), s.runs.Store(), art).Open(file)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer rc.Close()
	ctype := mime.TypeByExtension(path.Ext(file))
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Content-Length", strconv.FormatInt(f.Size, 10))
	w.Header().Set("ETag", `"`+f.Digest+`"`)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	// An artifact is data, never a page of this origin (an HTML file in
	// an output must not run scripts with the dashboard's session).
	w.Header().Set("Content-Security-Policy", "sandbox")
	if r.URL.Query().Get("download") != "" {
		w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(file)}))
	}
	if _, err := io.Copy(w, rc); err != nil {
		// Headers are gone: the client sees a short body. A digest
		// mismatch ends up here too, and must be loud.
		s.log.Warn("download interrupted", "run", r.PathValue("id"), "node", n.ID, "output", out, "file", file, "err", err)
	}
}
