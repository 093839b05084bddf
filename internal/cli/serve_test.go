package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestServeEmbedded runs `nerflow serve` on the embedded defaults as a
// user would: the API answers with the token only, a spec submitted over
// HTTP runs on the in-process workers, which the workers endpoint lists.
func TestServeEmbedded(t *testing.T) {
	if _, err := runPipelineCLI(context.Background(), t, t.TempDir(), "serve"); err == nil || !strings.Contains(err.Error(), "serve.token") {
		t.Fatalf("serve without a token: %v", err)
	}
	token := "cli-test-token-0123456789"
	t.Setenv("NERFLOW_SERVE_TOKEN", token)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var out string
	go func() {
		var err error
		out, err = runPipelineCLI(ctx, t, t.TempDir(), "serve", "--addr", addr, "--workers", "2")
		done <- err
	}()
	base := "http://" + addr
	call := func(method, path, body string, auth bool) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		if auth {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := http.Get(base + "/healthz")
		if err == nil {
			res.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, _ := call("GET", "/api/v1/runs", "", false); code != http.StatusUnauthorized {
		t.Errorf("runs without token: %d", code)
	}
	spec, _ := json.Marshal(map[string]any{"spec": cliSpec, "file": "cli.yaml"})
	code, body := call("POST", "/api/v1/runs", string(spec), true)
	if code != http.StatusCreated {
		t.Fatalf("submit: %d %s", code, body)
	}
	var sub struct{ ID string }
	_ = json.Unmarshal([]byte(body), &sub)
	for {
		_, body = call("GET", "/api/v1/runs/"+sub.ID, "", true)
		var st struct{ State string }
		_ = json.Unmarshal([]byte(body), &st)
		if st.State == "succeeded" {
			break
		}
		if st.State != "running" || time.Now().After(deadline) {
			t.Fatalf("run: %s", body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, body := call("GET", "/api/v1/workers", "", true); code != http.StatusOK || !strings.Contains(body, `"serve/gpu,cpu"`) {
		t.Errorf("workers: %d %s", code, body)
	}
	if code, body := call("POST", "/v1/predict", `{"text":"Paris"}`, true); code != http.StatusNotImplemented {
		t.Errorf("predict without a model: %d %s", code, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v\n%s", err, out)
	}
	if bytes.Contains([]byte(out), []byte(token)) {
		t.Error("serve printed its token")
	}
}
