package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nerflow/nerflow/eval"
	"github.com/nerflow/nerflow/internal/testenv"
	"github.com/nerflow/nerflow/pipeline/engine"
	"github.com/nerflow/nerflow/pipeline/spec"
	_ "github.com/nerflow/nerflow/pipeline/teststages"
	"github.com/nerflow/nerflow/refine"
	"github.com/nerflow/nerflow/registry"
	"github.com/nerflow/nerflow/storage"
)

// runPipelineCLI runs the nerflow command line in this process.
func runPipelineCLI(ctx context.Context, t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	root := NewRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append(args, "--log-level", "warn"))
	wd, _ := os.Getwd()
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	err := root.ExecuteContext(ctx)
	return out.String(), err
}

// pipelineCLI returns a function that runs nerflow in dir (runPipelineCLI)
// and fails the test if the command fails.
func pipelineCLI(ctx context.Context, t *testing.T, dir string) func(args ...string) string {
	return func(args ...string) string {
		t.Helper()
		out, err := runPipelineCLI(ctx, t, dir, args...)
		if err != nil {
			t.Fatalf("nerflow %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
}

const cliSpec = `
name: cli
nodes:
  text: {stage: test.emit, params: {text: hello}}
  train:
    stage: test.seed
    fan_out: {seed: [1, 2, 3]}
    inputs: {in: text}
  total: {stage: test.sum, inputs: {models: train.model}}
`

func writeSpec(t *testing.T, dir, text string) string {
	t.Helper()
	p := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRunEmbedded drives `nerflow run` as a user would: a first run
// executes every node, a second is entirely cached, --set re-runs the
// affected part, and the outputs can be read back with artifacts get.
func TestRunEmbedded(t *testing.T) {
	dir := t.TempDir()
	writeSpec(t, dir, cliSpec)
	ctx := context.Background()
	out, err := runPipelineCLI(ctx, t, dir, "run", "spec.yaml", "--no-progress")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	if !strings.Contains(out, "succeeded") || !strings.Contains(out, "5 nodes (5 done)") {
		t.Errorf("first run output:\n%s", out)
	}
	if !strings.Contains(out, "artifacts in ./.nerflow/store") {
		t.Errorf("run does not say where the artifacts are:\n%s", out)
	}
	out, err = runPipelineCLI(ctx, t, dir, "run", "spec.yaml", "--no-progress", "--export", "exported")
	if err != nil {
		t.Fatalf("second run: %v\n%s", err, out)
	}
	if !strings.Contains(out, "5 nodes (5 cached)") {
		t.Errorf("second run is not fully cached:\n%s", out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "exported", "total", "total", "total.json"))
	if err != nil {
		t.Fatal(err)
	}
	// (seed + len("hello")) over seeds 1..3 = 6+7+8.
	var total map[string]float64
	if err := json.Unmarshal(b, &total); err != nil || total["total"] != 21 {
		t.Errorf("exported total.json = %s (%v)", b, err)
	}
	out, err = runPipelineCLI(ctx, t, dir, "run", "spec.yaml", "--no-progress", "--set", "train.scale=2")
	if err != nil {
		t.Fatalf("run with --set: %v\n%s", err, out)
	}
	if !strings.Contains(out, "5 nodes (4 done, 1 cached)") {
		t.Errorf("--set train.scale=2 should re-run the 3 train nodes and total only:\n%s", out)
	}
	runs, err := runPipelineCLI(ctx, t, dir, "runs")
	if err != nil {
		t.Fatal(err)
	}
	// Newest first: the run with scale 2, (2·seed + 5) over seeds 1..3.
	newest := strings.Fields(strings.Split(runs, "\n")[1])[0]
	got, err := runPipelineCLI(ctx, t, dir, "artifacts", "get", newest, "total", "total")
	if err != nil {
		t.Fatalf("artifacts get: %v\n%s", err, got)
	}
	if !strings.Contains(got, `"total": 27`) {
		t.Errorf("artifacts get total total = %s", got)
	}
	st, err := runPipelineCLI(ctx, t, dir, "status", newest)
	if err != nil || !strings.Contains(st, "train[seed=2]") {
		t.Errorf("status: %v\n%s", err, st)
	}
	checkGetOutput(ctx, t, dir, newest)
}

// checkGetOutput: -o FILE writes that file (not a directory named FILE),
// -o DIR/ keeps the file's name, and nothing is overwritten without --force.
func checkGetOutput(ctx context.Context, t *testing.T, dir, run string) {
	t.Helper()
	get := func(args ...string) error {
		out, err := runPipelineCLI(ctx, t, dir, append([]string{"artifacts", "get", run, "total", "total"}, args...)...)
		if err != nil {
			return fmt.Errorf("%w\n%s", err, out)
		}
		return nil
	}
	if err := get("-o", "total.json"); err != nil {
		t.Fatalf("-o total.json: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "total.json")); err != nil || !strings.Contains(string(b), `"total": 27`) {
		t.Errorf("-o total.json wrote %q (%v), want the file itself", b, err)
	}
	if err := get("-o", "total.json"); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Errorf("-o onto an existing file: %v, want a refusal naming --force", err)
	}
	if err := get("-o", "total.json", "--force"); err != nil {
		t.Errorf("-o onto an existing file with --force: %v", err)
	}
	if err := get("-o", "out/"); err != nil {
		t.Fatalf("-o out/: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "out", "total.json")); err != nil {
		t.Errorf("-o out/ did not keep the file name: %v", err)
	}
	if err := get("-o", "out"); err == nil {
		t.Error("-o DIR holding the file already: overwritten without --force")
	}
}

// TestRunInvalidSpec: validation errors name the file, line and field.
func TestRunInvalidSpec(t *testing.T) {
	dir := t.TempDir()
	writeSpec(t, dir, `
nodes:
  text: {stage: test.emit}
  train:
    stage: test.seed
    params:
      seed: many
    inputs: {in: text}
`)
	_, err := runPipelineCLI(context.Background(), t, dir, "run", "spec.yaml")
	if err == nil || !strings.Contains(err.Error(), "spec.yaml:7: nodes.train.params.seed: want an integer") {
		t.Errorf("err = %v", err)
	}
}

// TestRunInterruptResumes: cancelling `nerflow run` (Ctrl-C) stops the
// run; running it again reuses what finished.
func TestRunInterruptResumes(t *testing.T) {
	dir := t.TempDir()
	writeSpec(t, dir, `
nodes:
  quick: {stage: test.emit, params: {text: q}}
  slow: {stage: test.slow, params: {steps: 100, step_time: 20ms}, inputs: {in: quick}}
`)
	// Ctrl-C cancels the command's context (see cmd/nerflow).
	ctx, cancel := context.WithCancel(context.Background())
	defer time.AfterFunc(700*time.Millisecond, cancel).Stop()
	out, err := runPipelineCLI(ctx, t, dir, "run", "spec.yaml", "--no-progress")
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("interrupted run: err = %v\n%s", err, out)
	}
	if !strings.Contains(out, "cancelled") {
		t.Errorf("interrupted run output:\n%s", out)
	}
	out, err = runPipelineCLI(context.Background(), t, dir, "run", "spec.yaml", "--no-progress", "--set", "slow.steps=3")
	if err != nil {
		t.Fatalf("rerun: %v\n%s", err, out)
	}
	if !strings.Contains(out, "2 nodes (1 done, 1 cached)") {
		t.Errorf("rerun should find quick cached:\n%s", out)
	}
}

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// nerflowBinary builds the nerflow command with the test stages compiled
// in, once per test process.
func nerflowBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "nerflow-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "nerflow")
		cmd := exec.Command("go", "build", "-tags", "nerflow_teststages", "-o", binary, "github.com/nerflow/nerflow/cmd/nerflow")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binary
}

// clusterEnv is a namespace of its own on the test Redis and a fresh bucket
// on the test MinIO, as environment variables for nerflow processes.
type clusterEnv struct {
	env   []string
	ns    string
	rdb   *redis.Client
	eng   *engine.Engine
	store storage.Store
}

func newClusterEnv(t *testing.T) *clusterEnv {
	t.Helper()
	addr := testenv.Redis(t)
	s3 := testenv.S3(t)
	var b [4]byte
	_, _ = rand.Read(b[:])
	suffix := hex.EncodeToString(b[:])
	url := "s3://nfcli-" + suffix + "?endpoint=" + s3.Endpoint + "&secure=false"
	c := &clusterEnv{ns: "nfcli-" + suffix}
	c.env = append(os.Environ(),
		"NERFLOW_REDIS_ADDR="+addr, "NERFLOW_REDIS_NAMESPACE="+c.ns, "NERFLOW_STORE="+url,
		"NERFLOW_S3_ACCESS_KEY="+s3.AccessKey, "NERFLOW_S3_SECRET_KEY="+s3.SecretKey, "NERFLOW_LOG_LEVEL=info")
	t.Setenv("NERFLOW_S3_ACCESS_KEY", s3.AccessKey)
	t.Setenv("NERFLOW_S3_SECRET_KEY", s3.SecretKey)
	st, err := storage.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	c.store = st
	c.rdb = redis.NewClient(&redis.Options{Addr: addr})
	c.eng = engine.New(c.rdb, st, engine.WithNamespace(c.ns))
	t.Cleanup(func() { c.eng.Close(); c.rdb.Close(); st.Close() })
	return c
}

// worker starts `nerflow worker` as a process of its own.
func (c *clusterEnv) worker(t *testing.T, name string, args ...string) *exec.Cmd {
	t.Helper()
	cmd, _ := c.workerWithLog(t, name, args...)
	return cmd
}

// workerWithLog is worker, also returning the path of the worker's log.
func (c *clusterEnv) workerWithLog(t *testing.T, name string, args ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(nerflowBinary(t), append([]string{"worker", "--queues", "cpu"}, args...)...)
	cmd.Env = c.env
	logf, err := os.Create(filepath.Join(t.TempDir(), name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("log of worker %s:\n%s", name, b)
		}
	})
	return cmd, logf.Name()
}

// submit runs `nerflow submit` and returns the run id it prints.
func (c *clusterEnv) submit(t *testing.T, specText string) string {
	t.Helper()
	dir := t.TempDir()
	p := writeSpec(t, dir, specText)
	cmd := exec.Command(nerflowBinary(t), "submit", p)
	cmd.Env = c.env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("submit: %v\n%s", err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

func (c *clusterEnv) waitFor(t *testing.T, id string, what string, cond func(*engine.RunStatus) bool) *engine.RunStatus {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		st, err := c.eng.Status(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if cond(st) {
			return st
		}
		time.Sleep(50 * time.Millisecond)
	}
	st, _ := c.eng.Status(context.Background(), id)
	b, _ := json.MarshalIndent(st, "", "  ")
	t.Fatalf("run %s: %s did not happen in 60s; status:\n%s", id, what, b)
	return nil
}

const resumableSpec = `
nodes:
  text: {stage: test.emit, params: {text: %s}}
  slow: {stage: test.slow, params: {steps: 25, step_time: 100ms}, inputs: {in: text}}
`

func slowProgress(st *engine.RunStatus) int64 {
	n, _ := st.Node("slow")
	if n == nil || n.State != engine.Running || n.Progress == nil {
		return 0
	}
	return n.Progress.Done
}

func resumedFrom(t *testing.T, c *clusterEnv, st *engine.RunStatus) int64 {
	t.Helper()
	n, _ := st.Node("slow")
	var r struct {
		Step        int64 `json:"step"`
		ResumedFrom int64 `json:"resumed_from"`
	}
	if _, err := storage.GetJSON(context.Background(), c.store, n.Outputs["result"].Key("result.json"), &r); err != nil {
		t.Fatal(err)
	}
	if r.Step != 25 {
		t.Errorf("slow counted to %d, want 25", r.Step)
	}
	return r.ResumedFrom
}

// TestWorkerKilledMidNode kills a worker process with SIGKILL while it runs
// a long node; another worker process finishes the run, resuming the node
// from its last checkpoint.
func TestWorkerKilledMidNode(t *testing.T) {
	c := newClusterEnv(t)
	a := c.worker(t, "a", "--node-lease", "2s")
	id := c.submit(t, fmt.Sprintf(resumableSpec, "kill"))
	// Someone follows the run through a pipe, as into a log file: the
	// interval after a bare --watch, as people type it.
	watch := exec.Command(nerflowBinary(t), "status", id, "--watch", "200ms")
	watch.Env = c.env
	var watched bytes.Buffer
	watch.Stdout, watch.Stderr = &watched, &watched
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	c.waitFor(t, id, "slow reaching step 3", func(st *engine.RunStatus) bool { return slowProgress(st) >= 3 })
	if err := a.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = a.Wait()

	killed := time.Now()
	// Status shows the node as lost once the worker's heartbeat expired
	// (asynq's server heartbeat, 10 s) and the node started 15 s ago.
	c.waitFor(t, id, "slow shown as lost", func(st *engine.RunStatus) bool {
		n, _ := st.Node("slow")
		return n != nil && n.Lost
	})
	status := exec.Command(nerflowBinary(t), "status", id)
	status.Env = c.env
	out, err := status.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "worker lost, waiting to be re-run") {
		t.Errorf("status of a node whose worker died: %v\n%s", err, out)
	}
	t.Logf("slow shown as lost %s after the SIGKILL", time.Since(killed).Round(100*time.Millisecond))
	// No lease is moved by hand: the new worker's reconciler sees the dead
	// one gone and re-drives the node.
	c.worker(t, "b", "--node-lease", "2s", "--reconcile-interval", "500ms")
	st := c.waitFor(t, id, "the run finishing", func(st *engine.RunStatus) bool { return st.State != engine.Running })
	t.Logf("worker SIGKILLed mid-node: run finished %s after the kill", time.Since(killed).Round(100*time.Millisecond))
	if st.State != engine.Succeeded {
		t.Fatalf("run %s: %s", st.State, st.Error)
	}
	slow, _ := st.Node("slow")
	if slow.Attempt != 1 {
		t.Errorf("slow finished on attempt %d, want 1 (the re-run after the worker died)", slow.Attempt)
	}
	if r := resumedFrom(t, c, st); r < 3 {
		t.Errorf("the new worker resumed from step %d, want >= 3 (the last checkpoint of the killed one)", r)
	}
	// The watch ended with the run, having printed each change once over
	// a hundred-odd polls: the node running, lost, back in the queue or
	// straight to its second attempt, done; then the final table.
	if err := watch.Wait(); err != nil {
		t.Errorf("status --watch of a run that succeeded: %v", err)
	}
	piped := watched.String()
	for _, want := range []string{"slow                     running\n", "slow                     worker lost, waiting to be re-run\n",
		"running (attempt 2)\n", "slow                     done (attempt 2) in ", "): succeeded, 2 nodes (2 done)"} {
		if !strings.Contains(piped, want) {
			t.Errorf("status --watch through a pipe has no %q:\n%s", want, piped)
		}
	}
	if n := strings.Count(piped, "\n"); n > 20 || strings.Contains(piped, "\x1b") {
		t.Errorf("status --watch through a pipe printed %d lines (escape sequences: %v):\n%s", n, strings.Contains(piped, "\x1b"), piped)
	}
}

// TestWorkerSIGTERMHandsBack: a worker told to stop (SIGTERM) waits for its
// shutdown timeout, then hands the running node back to the queue; the next
// worker resumes it from its checkpoint.
func TestWorkerSIGTERMHandsBack(t *testing.T) {
	c := newClusterEnv(t)
	a := c.worker(t, "a", "--shutdown-timeout", "300ms")
	id := c.submit(t, fmt.Sprintf(resumableSpec, "term"))
	c.waitFor(t, id, "slow reaching step 3", func(st *engine.RunStatus) bool { return slowProgress(st) >= 3 })
	if err := a.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("worker exited with %v after SIGTERM", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("worker did not exit within 10s of SIGTERM")
	}
	c.worker(t, "b")
	st := c.waitFor(t, id, "the run finishing", func(st *engine.RunStatus) bool { return st.State != engine.Running })
	if st.State != engine.Succeeded {
		t.Fatalf("run %s: %s", st.State, st.Error)
	}
	if r := resumedFrom(t, c, st); r < 3 {
		t.Errorf("resumed from step %d, want >= 3", r)
	}
}

// TestClusterCommands exercises submit, status --json, cancel and retry
// against real Redis and MinIO with a worker process.
func TestClusterCommands(t *testing.T) {
	c := newClusterEnv(t)
	c.worker(t, "a", "--concurrency", "2")
	id := c.submit(t, `
nodes:
  text: {stage: test.emit, params: {text: cmds}}
  bad: {stage: test.fail, params: {message: "no such gazetteer"}, retries: 0, inputs: {in: text}}
  after: {stage: test.concat, inputs: {in: bad}}
`)
	c.waitFor(t, id, "the run failing", func(st *engine.RunStatus) bool { return st.State == engine.Failed })
	run := func(args ...string) (string, error) {
		cmd := exec.Command(nerflowBinary(t), args...)
		cmd.Env = c.env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("status", id)
	if err == nil && !strings.Contains(out, "error in bad: stage test.fail: no such gazetteer") {
		err = fmt.Errorf("status does not show the error")
	}
	if err != nil {
		t.Fatalf("status: %v\n%s", err, out)
	}
	out, err = run("status", id, "--json")
	var st engine.RunStatus
	if err != nil || json.Unmarshal([]byte(out), &st) != nil || st.State != engine.Failed {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	out, err = run("retry", id)
	if err != nil || !strings.Contains(out, "2 nodes set to run again") {
		t.Fatalf("retry: %v\n%s", err, out)
	}
	c.waitFor(t, id, "the retried run failing", func(st *engine.RunStatus) bool { return st.State == engine.Failed })
	if _, err := run("cancel", id); err == nil {
		t.Error("cancelling a failed run succeeded")
	}
	// A minute of work, cancelled after its first step: under load a
	// command can take longer to start than resumableSpec's 2.5 s run.
	long := c.submit(t, fmt.Sprintf(strings.Replace(resumableSpec, "steps: 25", "steps: 600", 1), "cancel"))
	c.waitFor(t, long, "slow running", func(st *engine.RunStatus) bool { return slowProgress(st) >= 1 })
	if out, err := run("cancel", long); err != nil {
		t.Fatalf("cancel: %v\n%s", err, out)
	}
	st2 := c.waitFor(t, long, "the cancel", func(st *engine.RunStatus) bool { return st.State == engine.Cancelled })
	if s, _ := st2.Node("slow"); s.State != engine.Cancelled {
		t.Errorf("slow is %s after cancel", s.State)
	}
	out, err = run("runs")
	if err != nil || !strings.Contains(out, id) || !strings.Contains(out, long) {
		t.Errorf("runs: %v\n%s", err, out)
	}
}

// TestStatusWithoutRedis: while Redis is down, status and runs answer from
// the run manifests in the store and say what they cannot reach.
func TestStatusWithoutRedis(t *testing.T) {
	rs := testenv.PrivateRedis(t)
	s3 := testenv.S3(t)
	var b [4]byte
	_, _ = rand.Read(b[:])
	url := "s3://nfstatus-" + hex.EncodeToString(b[:]) + "?endpoint=" + s3.Endpoint + "&secure=false"
	t.Setenv("NERFLOW_S3_ACCESS_KEY", s3.AccessKey)
	t.Setenv("NERFLOW_S3_SECRET_KEY", s3.SecretKey)
	t.Setenv("NERFLOW_STORE", url)
	t.Setenv("NERFLOW_REDIS_ADDR", rs.Addr())
	ctx := context.Background()
	st, err := storage.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr()})
	defer rdb.Close()
	e := engine.New(rdb, st)
	defer e.Close()
	sp, err := spec.Parse([]byte(cliSpec), "spec.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	g, err := sp.Expand()
	if err != nil {
		t.Fatal(err)
	}
	id, err := e.Submit(ctx, g, engine.SubmitOptions{}) // no worker: it stays running
	if err != nil {
		t.Fatal(err)
	}
	rs.Stop()
	dir := t.TempDir()
	out, err := runPipelineCLI(ctx, t, dir, "status", id)
	if err != nil || !strings.Contains(out, "running") || !strings.Contains(out, "warning: cannot reach Redis") {
		t.Errorf("status with Redis down: %v\n%s", err, out)
	}
	out, err = runPipelineCLI(ctx, t, dir, "runs")
	if err != nil || !strings.Contains(out, id) {
		t.Errorf("runs with Redis down: %v\n%s", err, out)
	}
}

// The exported nodes of RoSTER: every step's dev report (read by select,
// which only compares them), the reports of select and of the labels'
// refinement, and the final model's scores; not the models and labels that
// later steps train on, nor register.
func TestSinksKeepTheReportsASelectionReads(t *testing.T) {
	node := func(id, stage string, children ...string) *spec.Node {
		return &spec.Node{ID: id, Stage: stage, Children: children}
	}
	nodes := []*spec.Node{
		node("refine-vote", refine.StageVote, "refine-refined", "refine"),
		node("refine", refine.StageChoose, "noise", "predict"),
		node("noise", "train.tagger", "eval-noise", "predict", "select"),
		node("eval-noise", "train.evaluate", "select"),
		node("predict", "train.predict", "distil"),
		node("distil", "train.tagger", "eval-distil", "select"),
		node("eval-distil", "train.evaluate", "select"),
		node("select", eval.StageSelect, "eval-select", "test", "register"),
		node("eval-select", "train.evaluate", "register"),
		node("test", "train.evaluate", "register"),
		node("register", registry.StageName),
	}
	var got []string
	for _, n := range sinks(nodes) {
		got = append(got, n.ID)
	}
	if want := []string{"eval-noise", "eval-distil", "eval-select", "test"}; !slices.Equal(got, want) {
		t.Errorf("sinks %v, want %v", got, want)
	}
	// Of the selection, its report (which model it kept), not its model;
	// of the labels' refinement, the vote's and the choice's reports.
	var all []string
	for _, e := range exports(nodes) {
		all = append(all, e.node+"."+e.output)
	}
	if want := []string{"eval-noise.", "eval-distil.", "eval-select.", "test.", "refine-vote.report", "refine.report", "select.report"}; !slices.Equal(all, want) {
		t.Errorf("exports %v, want %v", all, want)
	}
}
