package cli

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nerflow/nerflow/internal/servebench"
)

// loadSpec trains two small taggers on the server tests' fixture and
// registers both: versions 1 and 2 of model tiny.
const loadSpec = `
name: tiny
nodes:
  train:
    stage: train.tagger
    queue: gpu
    fan_out: {seed: [1, 2]}
    params: {head: crf, loss: crf, scheme: bio, epochs: 10, batch_size: 4, learning_rate: 0.02, hidden: 16,
      char_dim: 8, char_filters: 12, casing_dim: 4, word_dim: 16, min_word_count: 1,
      corpus_file: train_text.txt, corpus_labels: train_label.txt}
    inputs: {corpus: ./tiny}
  register:
    stage: registry.register
    fan_out: {seed: [1, 2]}
    inputs: {model: train.model}
`

// TestServeUnderLoad runs nerflow serve --model on two registered versions
// of a real tagger: 32 clients for a few seconds while the production tag
// moves from version 1 to 2 midway get no 5xx, answers that name the
// version that tagged them (version 1 first, then 2) and that each version
// gives the same way every time; then, with serve.max_queue 1, nerflow
// bench-serve's clients are refused with 503 and Retry-After, not queued.
// The latency is logged, not asserted (see docs/operations.md for a
// measurement).
func TestServeUnderLoad(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "tiny"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"train_text.txt", "train_label.txt"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "server", "testdata", "tiny", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "tiny", f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeSpec(t, dir, loadSpec)
	store := "file://" + filepath.Join(dir, "store")
	cli := pipelineCLI(ctx, t, dir)
	if out := cli("run", "spec.yaml", "--no-progress", "--store", store); !strings.Contains(out, "registered model tiny@2") {
		t.Fatalf("the run did not register two versions:\n%s", out)
	}
	cli("models", "promote", "tiny@1", "--tag", "production", "--store", store)
	token := "load-test-token-0123456789"
	t.Setenv("NERFLOW_SERVE_TOKEN", token)
	if _, err := runPipelineCLI(ctx, t, dir, "serve", "--store", store, "--model", "tiny", "--max-queue", "0"); err == nil || !strings.Contains(err.Error(), "--max-queue 0") {
		t.Errorf("serve --max-queue 0: %v", err)
	}

	url, stop := startServe(ctx, t, "--store", store, "--model", "tiny", "--reload-interval", "200ms", "--workers", "0")
	r, err := servebench.Run(ctx, servebench.Config{URL: url, Token: token, Clients: 32, Duration: 5 * time.Second,
		Promote: "tiny@2", PromoteAfter: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var report strings.Builder
	r.Print(&report)
	t.Logf("under load:\n%s", report.String())
	if len(r.Problems) > 0 || r.ServerErrors() > 0 || r.Codes[http.StatusOK] != r.Requests || r.Requests == 0 {
		t.Errorf("answers under load: %d requests, codes %v, problems %v", r.Requests, r.Codes, r.Problems)
	}
	one, two := r.Timeline["1"], r.Timeline["2"]
	if r.Versions["1"] == 0 || r.Versions["2"] == 0 || r.Promoted == nil || one.First > two.First || two.Last < one.Last {
		t.Errorf("versions %v answered %+v; promoted %+v", r.Versions, r.Timeline, r.Promoted)
	}
	stop()

	// The limit from the configuration (serve.max_queue), as a deployment
	// would set it.
	t.Setenv("NERFLOW_SERVE_MAX_QUEUE", "1")
	url, stop = startServe(ctx, t, "--store", store, "--model", "tiny", "--workers", "0")
	defer stop()
	out, err := runPipelineCLI(ctx, t, dir, "bench-serve", "--url", url, "--clients", "32", "--duration", "2s", "--json")
	if err != nil {
		t.Fatalf("bench-serve against a server with a queue of 1: %v\n%s", err, out)
	}
	var over servebench.Report
	if err := json.Unmarshal([]byte(out[:strings.LastIndex(out, "}")+1]), &over); err != nil {
		t.Fatalf("bench-serve --json: %v\n%s", err, out)
	}
	t.Logf("queue of 1: %d requests, codes %v, %d refused", over.Requests, over.Codes, over.Refused)
	if over.Refused == 0 || over.Codes[http.StatusServiceUnavailable] != over.Refused || over.Codes[http.StatusOK] == 0 || len(over.Problems) > 0 {
		t.Errorf("a queue of 1 under 32 clients: codes %v, refused with Retry-After %d, problems %v", over.Codes, over.Refused, over.Problems)
	}
}

// startServe runs nerflow serve with args on a free port until stop,
// which waits for it to end. It needs no working directory: give absolute
// paths.
func startServe(ctx context.Context, t *testing.T, args ...string) (url string, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(ctx)
	root := NewRoot()
	var out lockedWriter
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"serve", "--addr", addr, "--log-level", "warn"}, args...))
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	url = "http://" + addr
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		res, err := http.Get(url + "/healthz")
		if err == nil {
			res.Body.Close()
			break
		}
		select {
		case err := <-done:
			cancel()
			t.Fatalf("serve %v: %v\n%s", args, err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("serve %v did not start: %v\n%s", args, err, out.String())
		}
	}
	stopped := false
	return url, func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("serve %v: %v\n%s", args, err, out.String())
		}
	}
}

// lockedWriter collects what a command running in another goroutine
// writes.
type lockedWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
