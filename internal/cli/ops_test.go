package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nerflow/nerflow/internal/testenv"
	"github.com/nerflow/nerflow/registry"
)

const registerSpec = `
name: demo
nodes:
  train: {stage: test.seed, params: {seed: 4}}
  register: {stage: registry.register, inputs: {model: train.model}}
`

// nerflow run registers the run's model; models list, promote and show
// work on the store alone.
func TestModelsCommands(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	writeSpec(t, dir, registerSpec)
	cli := pipelineCLI(ctx, t, dir)
	if out := cli("run", "spec.yaml", "--no-progress"); !strings.Contains(out, "registered model demo@1") {
		t.Fatalf("run did not register the model:\n%s", out)
	}
	cli("run", "spec.yaml", "--no-progress", "--set", "train.seed=5")
	if out := cli("models", "list"); !strings.Contains(out, "demo   2         2") {
		t.Errorf("models list:\n%s", out)
	}
	if out := cli("models", "promote", "demo@1", "--tag", "production"); !strings.Contains(out, "demo@1 is now production") {
		t.Errorf("promote:\n%s", out)
	}
	out := cli("models", "show", "demo@production")
	for _, want := range []string{"model      demo@1", "tags       production", "trained by train (test.seed v1", `"seed":4`} {
		if !strings.Contains(out, want) {
			t.Errorf("models show has no %q:\n%s", want, out)
		}
	}
	var v registry.Version
	if err := json.Unmarshal([]byte(cli("models", "show", "demo", "--json")), &v); err != nil || v.Ref() != "demo@2" {
		t.Errorf("models show demo --json: %+v %v", v, err)
	}
	if _, err := runPipelineCLI(ctx, t, dir, "models", "promote", "demo@production", "--tag", "staging"); err == nil {
		t.Error("promoting a tag instead of a version succeeded")
	}
	if _, err := runPipelineCLI(ctx, t, dir, "models", "show", "demo@9"); err == nil {
		t.Error("showing a missing version succeeded")
	}
}

// The schedule and workers commands against a real Redis.
func TestScheduleCommands(t *testing.T) {
	addr := testenv.Redis(t)
	t.Setenv("NERFLOW_REDIS_ADDR", addr)
	t.Setenv("NERFLOW_REDIS_NAMESPACE", "nftest-cli-"+strings.ReplaceAll(time.Now().Format("150405.000000"), ".", ""))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	writeSpec(t, dir, registerSpec)
	cli := func(args ...string) (string, error) { return runPipelineCLI(ctx, t, dir, args...) }
	if out, err := cli("schedule", "add", "nightly", "--cron", "0 2 * * *", "spec.yaml", "--set", "train.seed=9"); err != nil ||
		!strings.Contains(out, "schedule nightly added; next run ") {
		t.Fatalf("schedule add: %v\n%s", err, out)
	}
	if out, err := cli("schedule", "add", "bad", "--cron", "61 * * * *", "spec.yaml"); err == nil {
		t.Errorf("a bad cron expression was accepted:\n%s", out)
	}
	if out, err := cli("schedule", "add", "bad", "--cron", "@daily", "nope.yaml"); err == nil {
		t.Errorf("a missing spec was accepted:\n%s", out)
	}
	if out, err := cli("schedule", "pause", "nightly"); err != nil || out != "schedule nightly paused\n" {
		t.Fatalf("schedule pause: %v\n%s", err, out)
	}
	out, err := cli("schedule", "list")
	if err != nil || !strings.Contains(out, "nightly") || !strings.Contains(out, "--set train.seed=9") || !strings.Contains(out, "paused") {
		t.Errorf("schedule list: %v\n%s", err, out)
	}
	if out, err := cli("schedule", "resume", "nightly"); err != nil || !strings.HasPrefix(out, "schedule nightly resumed; next run ") {
		t.Fatalf("schedule resume: %v\n%s", err, out)
	}
	if out, err := cli("schedule", "history", "nightly"); err != nil || !strings.HasPrefix(out, "TICK") {
		t.Errorf("schedule history: %v\n%s", err, out)
	}
	out, err = cli("schedule", "rm", "nightly")
	want := "removed schedule nightly (0 2 * * *, " + filepath.Join(dir, "spec.yaml") + ", --set train.seed=9; it never fired); its runs and models stay\n"
	if err != nil || out != want {
		t.Fatalf("schedule rm: %v\n%s\nwant\n%s", err, out, want)
	}
	if _, err := cli("schedule", "rm", "nightly"); err == nil {
		t.Error("removing a missing schedule succeeded")
	}
	if out, err := cli("workers"); err != nil || !strings.Contains(out, "no live workers") {
		t.Errorf("workers: %v\n%s", err, out)
	}
	if out, err := cli("worker", "--queues", "gpu"); err == nil || !strings.Contains(err.Error(), "needs a GPU device") {
		t.Errorf("a CPU worker took the gpu queue: %v\n%s", err, out)
	}
}

// runCLIQuiet runs the command line with the default log level, stdout and
// stderr apart.
func runCLIQuiet(ctx context.Context, t *testing.T, dir string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	root := NewRoot()
	var out, errs bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errs)
	root.SetArgs(args)
	t.Chdir(dir)
	err = root.ExecuteContext(ctx)
	return out.String(), errs.String(), err
}

// The models that `models list` registers on its way (runs finished since
// the registry last looked) are not announced in the listing's output,
// unless debug lines are asked for.
func TestModelsListPrintsNoLogLines(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	writeSpec(t, dir, registerSpec)
	if out, err := runPipelineCLI(ctx, t, dir, "run", "spec.yaml", "--no-progress"); err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	forget := func() {
		// As when the run finished on a worker: the registry has not
		// seen it yet.
		if err := os.RemoveAll(filepath.Join(dir, ".nerflow", "store", "registry")); err != nil {
			t.Fatal(err)
		}
	}
	forget()
	out, errs, err := runCLIQuiet(ctx, t, dir, "models", "list")
	if err != nil || !strings.Contains(out, "demo") {
		t.Fatalf("models list: %v\n%s", err, out)
	}
	if errs != "" || strings.Contains(out, "level=") {
		t.Errorf("models list logged:\nstdout:\n%s\nstderr:\n%s", out, errs)
	}
	forget()
	_, errs, err = runCLIQuiet(ctx, t, dir, "models", "list", "--log-level", "debug")
	if err != nil || !strings.Contains(errs, "level=DEBUG msg=\"model registered\"") {
		t.Errorf("models list --log-level debug does not say what it registered: %v\n%s", err, errs)
	}
}
