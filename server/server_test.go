package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nerflow/nerflow/eval"
	"github.com/nerflow/nerflow/pipeline/engine"
	"github.com/nerflow/nerflow/predict"
	"github.com/nerflow/nerflow/schedule"
	"github.com/nerflow/nerflow/server"
)

func TestAPIOnRealServices(t *testing.T) { exerciseAPI(t, newStack(t, true)) }

func TestAPIOnEmbeddedDefaults(t *testing.T) { exerciseAPI(t, newStack(t, false)) }

// exerciseAPI drives every endpoint the way the dashboard and curl users
// do: auth, a spec submitted over HTTP that trains, scores and tags with a
// tiny tagger, the run's graph, nodes, logs and files, the control calls,
// and predictions from the run's model, reloaded when its source moves.
func exerciseAPI(t *testing.T, s *stack) {
	// Health is open; everything else needs the token.
	if code, _ := s.do("GET", "/healthz", nil, false); code != http.StatusOK {
		t.Fatalf("healthz: %d", code)
	}
	for path, want := range map[string]int{"/api/v1/runs": 401, "/api/v1/info": 401, "/metrics": 401, "/assets/app.js": 303, "/": 303, "/login": 200} {
		if code, _ := s.do("GET", path, nil, false); code != want {
			t.Errorf("GET %s without token: %d, want %d", path, code, want)
		}
	}
	req, _ := http.NewRequest("GET", s.url+"/api/v1/runs", nil)
	req.Header.Set("Authorization", "Bearer "+s.token+"x")
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a wrong token: %v %v", res.StatusCode, err)
	}
	if code, _ := s.do("POST", "/v1/predict", map[string]string{"text": "Paris"}, false); code != http.StatusUnauthorized {
		t.Fatalf("predict without token: %d", code)
	}

	// A bad spec is refused with its line.
	code, b := s.do("POST", "/api/v1/runs", map[string]any{"spec": "name: bad\nnodes:\n  a:\n    stage: no.such\n", "file": "bad.yaml"}, true)
	if code != http.StatusBadRequest || !strings.Contains(string(b), "bad.yaml:4") {
		t.Fatalf("bad spec: %d %s", code, b)
	}
	if code, b := s.do("POST", "/api/v1/runs", map[string]any{"spec": "x", "bogus": 1}, true); code != http.StatusBadRequest {
		t.Fatalf("unknown field: %d %s", code, b)
	}

	// Before any model: predict is unavailable, not an error of the client.
	if code, b := s.do("POST", "/v1/predict", map[string]string{"text": "Paris"}, true); code != http.StatusServiceUnavailable {
		t.Fatalf("predict without a model: %d %s", code, b)
	}

	id := s.submit("tiny.yaml")
	run := s.wait(id)
	if run.State != engine.Succeeded {
		t.Fatalf("run %s: %s %s", id, run.State, run.Error)
	}
	var list struct{ Runs []engine.RunSummary }
	s.get("/api/v1/runs", &list)
	if len(list.Runs) == 0 || list.Runs[0].ID != id {
		t.Fatalf("runs list: %+v", list.Runs)
	}
	if len(run.Graph.Nodes) != 8 || !strings.Contains(run.Graph.Spec, "train.tagger") {
		t.Fatalf("graph: %+v", run.Graph)
	}
	parents := map[string][]string{}
	for _, n := range run.Graph.Nodes {
		parents[n.ID] = n.Parents
	}
	if p := parents["eval[seed=2]"]; len(p) != 1 || p[0] != "train[seed=2]" {
		t.Errorf("parents of eval[seed=2]: %v", p)
	}

	// A node, its logs (the trainer logs its epochs), its files.
	train := "/api/v1/runs/" + id + "/nodes/" + url.PathEscape("train[seed=1]")
	var node engine.NodeStatus
	s.get(train, &node)
	if node.State != engine.Done || node.Outputs["model"].Digest == "" || node.Progress == nil || node.Progress.Done != node.Progress.Total {
		t.Fatalf("node: %+v", node)
	}
	var logs struct{ Lines []map[string]any }
	s.get(train+"/logs", &logs)
	if len(logs.Lines) == 0 {
		t.Fatalf("no log lines kept for %s", node.ID)
	}
	for _, l := range logs.Lines {
		if l["msg"] == nil || l["level"] == nil {
			t.Fatalf("log line %v", l)
		}
	}
	var rep eval.Report
	s.get("/api/v1/runs/"+id+"/nodes/"+url.PathEscape("eval[seed=1]")+"/outputs/report/files/report.json", &rep)
	if rep.Sentences != 4 || rep.Micro.Support != 9 {
		t.Errorf("evaluation report: %+v", rep)
	}
	// The predict.entities stage tagged each line of raw.txt.
	code, b = s.do("GET", "/api/v1/runs/"+id+"/nodes/"+url.PathEscape("entities[seed=1]")+"/outputs/entities/files/entities.jsonl", nil, true)
	if code != http.StatusOK {
		t.Fatalf("entities: %d %s", code, b)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 {
		t.Fatalf("entities.jsonl has %d lines:\n%s", len(lines), b)
	}
	for i, l := range lines {
		var e struct {
			Line     int
			Text     string
			Entities []predict.Entity
		}
		if err := json.Unmarshal([]byte(l), &e); err != nil || e.Line != i+1 || e.Text == "" {
			t.Fatalf("entities line %d: %s (%v)", i+1, l, err)
		}
		for _, ent := range e.Entities {
			if e.Text[ent.Start:ent.End] != ent.Text {
				t.Errorf("line %d: entity %+v does not match its offsets", i+1, ent)
			}
		}
	}
	if code, _ := s.do("GET", train+"/outputs/model/files/nope.pt", nil, true); code != http.StatusNotFound {
		t.Errorf("missing file: %d", code)
	}
	if code, _ := s.do("GET", "/api/v1/runs/20990101-000000-000000", nil, true); code != http.StatusNotFound {
		t.Errorf("missing run: %d", code)
	}

	// Control: a finished run cannot be cancelled, nor a succeeded one retried.
	if code, b := s.do("POST", "/api/v1/runs/"+id+"/cancel", nil, true); code != http.StatusConflict {
		t.Errorf("cancel a finished run: %d %s", code, b)
	}
	if code, b := s.do("POST", "/api/v1/runs/"+id+"/retry", nil, true); code != http.StatusConflict {
		t.Errorf("retry a succeeded run: %d %s", code, b)
	}
	// A running run is cancelled, then retried.
	slow := s.submit("slow.yaml")
	if code, b := s.do("POST", "/api/v1/runs/"+slow+"/cancel", map[string]string{"reason": "test"}, true); code != http.StatusOK {
		t.Fatalf("cancel: %d %s", code, b)
	}
	if r := s.wait(slow); r.State != engine.Cancelled {
		t.Fatalf("cancelled run is %s", r.State)
	}
	if code, b := s.do("POST", "/api/v1/runs/"+slow+"/retry", nil, true); code != http.StatusOK || !strings.Contains(string(b), `"nodes"`) {
		t.Fatalf("retry: %d %s", code, b)
	}
	if r := s.wait(slow); r.State != engine.Succeeded {
		t.Fatalf("retried run is %s: %s", r.State, r.Error)
	}

	// The run registered two versions; serving follows the production tag.
	var models struct{ Models []map[string]any }
	s.get("/api/v1/models", &models)
	if len(models.Models) != 2 || models.Models[0]["ref"] != "tiny@2" || models.Models[1]["ref"] != "tiny@1" || models.Models[1]["f1"] == nil {
		t.Fatalf("models: %+v", models.Models)
	}
	var v1 struct {
		Model struct{ Digest string }
		Run   string
	}
	s.get("/api/v1/models/tiny@1", &v1)
	if v1.Run != id {
		t.Errorf("tiny@1 comes from run %s, not %s", v1.Run, id)
	}
	if code, _ := s.do("GET", "/api/v1/models/nope@1", nil, true); code != http.StatusNotFound {
		t.Errorf("unknown model: %d", code)
	}
	if code, _ := s.do("POST", "/api/v1/models/tiny@9/promote", map[string]string{"tag": "production"}, true); code != http.StatusNotFound {
		t.Errorf("promote an unknown version: %d", code)
	}
	s.promote("tiny@1")
	var p1 predict.Response
	code, b = s.do("POST", "/v1/predict", map[string]string{"text": "John Smith flew to Paris. Anna met Carlos in Berlin."}, true)
	if code != http.StatusOK || json.Unmarshal(b, &p1) != nil {
		t.Fatalf("predict: %d %s", code, b)
	}
	if p1.Model.Name != "tiny" || p1.Model.Version != "1" || p1.Model.Digest != v1.Model.Digest || p1.TokenCount != 12 || len(p1.Results) != 1 {
		t.Fatalf("predict answer: %+v", p1)
	}
	t.Logf("tiny@1 finds %+v", p1.Results[0].Entities)
	for _, e := range p1.Results[0].Entities {
		if e.Confidence <= 0 || e.Confidence > 1 || e.Type != "PER" && e.Type != "LOC" {
			t.Errorf("entity %+v", e)
		}
	}
	code, b = s.do("POST", "/v1/predict", map[string]any{"tokens": [][]string{{"John", "lives", "in", "Paris"}}}, true)
	if code != http.StatusOK {
		t.Fatalf("predict tokens: %d %s", code, b)
	}
	// Answers are compact JSON: one line, however many tokens.
	long := strings.Repeat("John Smith flew from Paris to Berlin. ", 200)
	code, b = s.do("POST", "/v1/predict", map[string]string{"text": long}, true)
	var indented bytes.Buffer
	if code != http.StatusOK || bytes.Count(b, []byte("\n")) != 1 || json.Indent(&indented, b, "", "  ") != nil {
		t.Fatalf("predict a long text: %d, %d lines", code, bytes.Count(b, []byte("\n")))
	}
	t.Logf("predict: %d bytes of text answered with %d bytes of JSON (%d indented)", len(long), len(b), indented.Len())
	checkErrors(t, s)
	s.promote("tiny@2")
	var p2 predict.Response
	_, b = s.do("POST", "/v1/predict", map[string]string{"text": "John Smith flew to Paris."}, true)
	if json.Unmarshal(b, &p2) != nil || p2.Model.Version != "2" || p2.Model.Digest == p1.Model.Digest {
		t.Fatalf("after the tag moved: %s", b)
	}
	s.get("/api/v1/models", &models)
	if tags, _ := models.Models[0]["tags"].([]any); len(tags) != 1 || tags[0] != "production" {
		t.Errorf("tags after promotion: %+v", models.Models)
	}

	// The workers of this process advertise themselves.
	var ws struct{ Workers []map[string]any }
	s.get("/api/v1/workers", &ws)
	if len(ws.Workers) == 0 || !strings.HasPrefix(ws.Workers[0]["name"].(string), "test") {
		t.Errorf("workers: %+v", ws.Workers)
	}

	var info map[string]any
	s.get("/api/v1/info", &info)
	if info["predict"] != true || info["model"] != "tiny" || info["workers"] != true || info["schedules"] != true || info["metrics"] != true {
		t.Errorf("info: %v", info)
	}

	// Schedules: add, list, pause, resume, delete.
	specFile, _ := filepath.Abs("testdata/tiny.yaml")
	if code, b := s.do("POST", "/api/v1/schedules", server.NewSchedule{Name: "nightly", Cron: "0 2 * * *", SpecFile: specFile, Set: []string{"train.epochs=2"}}, true); code != http.StatusCreated {
		t.Fatalf("add schedule: %d %s", code, b)
	}
	for _, bad := range []server.NewSchedule{{Name: "bad", Cron: "every night", SpecFile: specFile}, {Name: "nospec", Cron: "@daily", SpecFile: "/nonexistent.yaml"},
		{Name: "nightly", Cron: "@daily", SpecFile: specFile}} {
		if code, b := s.do("POST", "/api/v1/schedules", bad, true); code != http.StatusBadRequest {
			t.Errorf("add %+v: %d %s", bad, code, b)
		}
	}
	var scheds struct{ Schedules []map[string]any }
	s.get("/api/v1/schedules", &scheds)
	if len(scheds.Schedules) != 1 || scheds.Schedules[0]["name"] != "nightly" || scheds.Schedules[0]["next"] == nil || scheds.Schedules[0]["paused"] != false {
		t.Fatalf("schedules: %+v", scheds.Schedules)
	}
	if code, b := s.do("POST", "/api/v1/schedules/nightly/pause", nil, true); code != http.StatusOK {
		t.Fatalf("pause: %d %s", code, b)
	}
	s.get("/api/v1/schedules", &scheds)
	if scheds.Schedules[0]["paused"] != true || scheds.Schedules[0]["next"] != nil {
		t.Errorf("paused schedule: %+v", scheds.Schedules[0])
	}
	if code, _ := s.do("POST", "/api/v1/schedules/nightly/resume", nil, true); code != http.StatusOK {
		t.Errorf("resume: %d", code)
	}
	if code, _ := s.do("POST", "/api/v1/schedules/nightly/delete", nil, true); code != http.StatusOK {
		t.Errorf("delete: %d", code)
	}
	if code, _ := s.do("POST", "/api/v1/schedules/nightly/delete", nil, true); code != http.StatusNotFound {
		t.Errorf("delete again: %d", code)
	}

	// Metrics, with the token only.
	code, b = s.do("GET", "/metrics", nil, true)
	if code != http.StatusOK || !strings.Contains(string(b), "nerflow_up 1") || !strings.Contains(string(b), "nerflow_queue_processed_total{queue=\"cpu\"}") {
		var ours []string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "nerflow_") {
				ours = append(ours, l)
			}
		}
		t.Errorf("metrics: %d\n%s", code, strings.Join(ours, "\n"))
	}
}

func TestTokenRequired(t *testing.T) {
	if _, err := server.New(nil, "short"); err == nil {
		t.Fatal("a short token is accepted")
	}
}

// checkErrors: every error of the API, the router's own included, is a
// JSON {"error": ...} that says what to do; requests the predictor cannot
// take are refused with the field at fault.
func checkErrors(t *testing.T, s *stack) {
	t.Helper()
	huge := map[string]string{"text": strings.Repeat("Paris is big. ", 80_000)} // 1.1 MB
	for _, c := range []struct {
		method, path string
		body         any
		code         int
		says         string
	}{
		{"POST", "/v1/predict", map[string]any{}, 400, `nothing to tag: give one of "text"`},
		{"POST", "/v1/predict", map[string]any{"text": ""}, 400, `"text" is empty`},
		{"POST", "/v1/predict", map[string]any{"text": " \n "}, 400, `"text" is empty`},
		{"POST", "/v1/predict", map[string]any{"texts": []string{}}, 400, `"texts" is empty`},
		{"POST", "/v1/predict", map[string]any{"tokens": [][]string{}}, 400, `"tokens" is empty`},
		{"POST", "/v1/predict", map[string]any{"text": "a", "tokens": [][]string{{"a"}}}, 400, "give only one of"},
		{"POST", "/v1/predict", map[string]any{"tokens": [][]string{{}}}, 400, "sentence 1 has no tokens"},
		{"POST", "/v1/predict", map[string]any{"text": "a", "model": "other"}, 404, `serves model "tiny", not "other"`},
		{"POST", "/v1/predict", huge, 413, "request body over 1048576 bytes"},
		{"GET", "/v1/predict", nil, 405, "GET /v1/predict: method not allowed (allowed: POST)"},
		{"DELETE", "/api/v1/runs", nil, 405, "method not allowed (allowed: GET, HEAD, POST)"},
		{"GET", "/api/v1/no-such-thing", nil, 404, "GET /api/v1/no-such-thing: no such endpoint"},
		{"GET", "/api/v1/runs/no-such-run", nil, 404, "no-such-run"},
	} {
		code, b := s.do(c.method, c.path, c.body, true)
		var e struct{ Error string }
		if err := json.Unmarshal(b, &e); err != nil || code != c.code || !strings.Contains(e.Error, c.says) {
			t.Errorf("%s %s %.80v: %d %.300s, want %d and a JSON error saying %q", c.method, c.path, c.body, code, b, c.code, c.says)
		}
	}
}

// The queue views: each queue's counts, its archived tasks (node
// executions that failed for good) with their run, node and error, and
// deleting one; queues that are not nerflow's are not found.
func TestQueues(t *testing.T) {
	s := newStack(t, true)
	var qs struct{ Queues []map[string]any }
	s.get("/api/v1/queues", &qs)
	if len(qs.Queues) != 2 || qs.Queues[0]["name"] != "cpu" || qs.Queues[1]["name"] != "gpu" {
		t.Fatalf("queues before any run: %+v", qs.Queues)
	}
	id := s.submit("fail.yaml")
	if r := s.wait(id); r.State != engine.Failed {
		t.Fatalf("run %s: %s", id, r.State)
	}
	// The run fails inside the task's handler, and asynq archives the task
	// only once the handler has returned: wait for the queue to catch up.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		s.get("/api/v1/queues", &qs)
		if qs.Queues[0]["active"] == 0.0 || time.Now().After(deadline) {
			break
		}
	}
	if cpu := qs.Queues[0]; cpu["archived"] != 1.0 || cpu["failed_today"] != 1.0 || cpu["active"] != 0.0 {
		t.Errorf("cpu queue after a failed node: %+v", cpu)
	}
	var tasks struct {
		Tasks []struct{ ID, Run, Node, Error string }
	}
	s.get("/api/v1/queues/cpu/archived", &tasks)
	if len(tasks.Tasks) != 1 || tasks.Tasks[0].Run != id || tasks.Tasks[0].Node != "bad" || tasks.Tasks[0].Error != "stage test.fail: no such gazetteer" {
		t.Fatalf("archived tasks: %+v", tasks.Tasks)
	}
	task := tasks.Tasks[0].ID
	for _, c := range []struct {
		path string
		body any
		code int
	}{
		{"/api/v1/queues/tpu/archived/delete", map[string]string{"id": task}, 404},
		{"/api/v1/queues/cpu/archived/delete", map[string]string{}, 400},
		{"/api/v1/queues/cpu/archived/delete", map[string]string{"id": "no/such"}, 404},
		{"/api/v1/queues/cpu/archived/delete", map[string]string{"id": task}, 200},
		{"/api/v1/queues/cpu/archived/delete", map[string]string{"id": task}, 404},
	} {
		if code, b := s.do("POST", c.path, c.body, true); code != c.code {
			t.Errorf("POST %s %v: %d %s, want %d", c.path, c.body, code, b, c.code)
		}
	}
	if code, b := s.do("GET", "/api/v1/queues/gpu/archived", nil, true); code != 200 || !strings.Contains(string(b), `"tasks": []`) {
		t.Errorf("archived tasks of the gpu queue, never used: %d %s", code, b)
	}
	if code, b := s.do("POST", "/api/v1/queues/gpu/archived/delete", map[string]string{"id": task}, true); code != 404 {
		t.Errorf("deleting from the gpu queue, never used: %d %s", code, b)
	}
	if code, b := s.do("GET", "/api/v1/queues/tpu/archived", nil, true); code != 404 || !strings.Contains(string(b), "cpu and gpu") {
		t.Errorf("archived tasks of queue tpu: %d %s", code, b)
	}
	s.get("/api/v1/queues/cpu/archived", &tasks)
	s.get("/api/v1/queues", &qs)
	if len(tasks.Tasks) != 0 || qs.Queues[0]["archived"] != 0.0 {
		t.Errorf("after the delete: tasks %+v, queue %+v", tasks.Tasks, qs.Queues[0])
	}

	// A live task is not deleted: that would lose its node's execution.
	slow := s.submit("slow.yaml", "work.step_time=200ms")
	s.waitNode(slow, "work[steps=20]", func(*engine.NodeStatus) bool { return true })
	if code, b := s.do("POST", "/api/v1/queues/cpu/archived/delete", map[string]string{"id": slow + "/work[steps=20]"}, true); code != http.StatusConflict {
		t.Errorf("deleting a running node's task: %d %s", code, b)
	}
	s.do("POST", "/api/v1/runs/"+slow+"/cancel", nil, true)
}

// A run a schedule submitted says so in the runs list, and the schedule's
// tick history lists the tick with its run.
func TestScheduledRuns(t *testing.T) {
	s := newStack(t, true)
	specFile, _ := filepath.Abs("testdata/fail.yaml")
	if code, b := s.do("POST", "/api/v1/schedules", server.NewSchedule{Name: "often", Cron: "*/5 * * * *", SpecFile: specFile}, true); code != http.StatusCreated {
		t.Fatalf("add schedule: %d %s", code, b)
	}
	other := s.submit("fail.yaml")
	later := time.Now().Add(6 * time.Minute)
	sched := schedule.New(schedule.NewStore(s.rdb, s.ns), s.e, schedule.WithClock(func() time.Time { return later }),
		schedule.WithGrace(time.Hour), schedule.WithName("test"), schedule.WithLogger(slog.New(slog.DiscardHandler)))
	evs, err := sched.Tick(context.Background())
	if err != nil || len(evs) != 1 || evs[0].Outcome != schedule.OutcomeSubmitted {
		t.Fatalf("tick: %v %+v", err, evs)
	}
	var list struct {
		Runs []struct{ ID, Schedule string }
	}
	s.get("/api/v1/runs", &list)
	by := map[string]string{}
	for _, r := range list.Runs {
		by[r.ID] = r.Schedule
	}
	if by[evs[0].Run] != "often" || by[other] != "" {
		t.Errorf("runs' schedules: %v (scheduled %s, submitted by hand %s)", by, evs[0].Run, other)
	}
	var hist struct {
		Ticks []schedule.Event
	}
	s.get("/api/v1/schedules/often/history", &hist)
	if len(hist.Ticks) != 1 || hist.Ticks[0].Run != evs[0].Run || hist.Ticks[0].Scheduler != "test" {
		t.Errorf("history: %+v", hist.Ticks)
	}
	if code, b := s.do("GET", "/api/v1/schedules/nope/history", nil, true); code != http.StatusNotFound {
		t.Errorf("history of a missing schedule: %d %s", code, b)
	}
}
