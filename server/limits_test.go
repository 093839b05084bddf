package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nerflow/nerflow/pipeline/engine"
	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/server"
	"github.com/nerflow/nerflow/storage/fsstore"
)

const limitsToken = "limits-test-token-0123456789"

// limitsServer serves the API of an embedded engine over real HTTP (the
// http.Server that nerflow serve uses) with one finished run whose node a
// has an output a file of which the download tests ask for.
func limitsServer(t *testing.T, opts ...server.Option) (*server.Server, string, *engine.RunStatus) {
	t.Helper()
	st, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	em, err := engine.StartEmbedded(st, engine.WorkerOptions{}, engine.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { em.Close() })
	s, err := spec.Parse([]byte("nodes:\n  a: {stage: test.emit, params: {text: secret-free}}\n"), "t.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	g, err := s.Expand()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := em.Run(ctx, g, engine.SubmitOptions{}, 20*time.Millisecond, nil)
	if err != nil || run.State != engine.Succeeded {
		t.Fatalf("run: %v %+v", err, run)
	}
	srv, err := server.New(em.Engine, limitsToken, append([]server.Option{server.WithLogger(quiet)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	hs := srv.HTTPServer()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	return srv, "http://" + ln.Addr().String(), run
}

func call(t *testing.T, method, u, token string, body io.Reader, header http.Header) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, string(b)
}

// Wrong tokens from one address are answered with 401 a few times a
// window, then with 429 and Retry-After, whatever that address presents
// (the right token too: answering it would confirm a guess); other
// addresses are not affected, requests without any token do not count, and
// the address may try again once the window has passed.
func TestWrongTokensAreRateLimited(t *testing.T) {
	const window = 2 * time.Second
	srv, base, _ := limitsServer(t, server.WithAuthLimit(3, window))
	for i := range 5 {
		if code, _, _ := call(t, "GET", base+"/api/v1/runs", "", nil, nil); code != http.StatusUnauthorized {
			t.Fatalf("request %d without a token: %d, want 401", i, code)
		}
	}
	for i := range 3 {
		if code, _, _ := call(t, "GET", base+"/api/v1/runs", "wrong-token-"+fmt.Sprint(i), nil, nil); code != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d, want 401", i, code)
		}
	}
	start := time.Now()
	code, h, body := call(t, "GET", base+"/api/v1/runs", "wrong-token-4", nil, nil)
	if code != http.StatusTooManyRequests || h.Get("Retry-After") == "" || !strings.Contains(body, "too many wrong tokens") {
		t.Fatalf("fourth wrong token in the window: %d %v %s, want 429 with Retry-After", code, h, body)
	}
	if code, _, _ := call(t, "GET", base+"/api/v1/runs", limitsToken, nil, nil); code != http.StatusTooManyRequests {
		t.Errorf("the right token from a limited address: %d, want 429", code)
	}
	form := url.Values{"token": {"another guess"}}.Encode()
	if code, _, _ := call(t, "POST", base+"/login", "", strings.NewReader(form), http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}); code != http.StatusTooManyRequests {
		t.Errorf("the login form from a limited address: %d, want 429", code)
	}
	// Another address is served.
	req := httptest.NewRequest("GET", "/api/v1/runs", nil)
	req.RemoteAddr = "192.0.2.7:4242"
	req.Header.Set("Authorization", "Bearer "+limitsToken)
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Errorf("the right token from another address: %d, want 200", rec.Code)
	}
	// After the window, the address may present a token again.
	time.Sleep(window - time.Since(start) + 100*time.Millisecond)
	if code, _, body := call(t, "GET", base+"/api/v1/runs", limitsToken, nil, nil); code != http.StatusOK {
		t.Errorf("the right token after the window: %d %s", code, body)
	}
	// Wrong login forms count too.
	for i := range 4 {
		code, _, _ := call(t, "POST", base+"/login", "", strings.NewReader(url.Values{"token": {"guess"}}.Encode()),
			http.Header{"Content-Type": {"application/x-www-form-urlencoded"}})
		want := http.StatusUnauthorized
		if i == 3 {
			want = http.StatusTooManyRequests
		}
		if code != want {
			t.Errorf("wrong login %d: %d, want %d", i, code, want)
		}
	}
}

// Bodies over the bound are refused on every endpoint, whether the
// endpoint reads a body or not, and headers over theirs too.
func TestRequestSizesAreBounded(t *testing.T) {
	const maxBody = 64 << 10
	srv, base, run := limitsServer(t, server.WithMaxBody(maxBody))
	big := strings.Repeat("x", maxBody+1)
	for _, ep := range []string{"POST /api/v1/runs", "POST /v1/predict", "POST /api/v1/schedules", "POST /login",
		"POST /api/v1/runs/" + run.ID + "/cancel", "GET /api/v1/runs", "GET /api/v1/runs/" + run.ID, "GET /healthz", "POST /api/v1/nope"} {
		method, path, _ := strings.Cut(ep, " ")
		code, _, body := call(t, method, base+path, limitsToken, strings.NewReader(big), nil)
		if code != http.StatusRequestEntityTooLarge {
			t.Errorf("%s with a body of %d bytes: %d %s, want 413", ep, len(big), code, body)
		}
	}
	// A body whose length is not announced (chunked) is cut at the bound
	// where a handler reads it.
	pr, pw := io.Pipe()
	go func() { pw.Write([]byte(`{"spec": "`)); pw.Write([]byte(big)); pw.Write([]byte(`"}`)); pw.Close() }()
	if code, _, body := call(t, "POST", base+"/api/v1/runs", limitsToken, pr, nil); code != http.StatusRequestEntityTooLarge {
		t.Errorf("a chunked body over the bound: %d %s, want 413", code, body)
	}
	// Headers: net/http refuses them on the wire (431) ...
	huge := strings.Repeat("h", server.MaxHeaderBytes+8<<10)
	if code, _, _ := call(t, "GET", base+"/healthz", "", nil, http.Header{"X-Padding": {huge}}); code != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a %d-byte header over the wire: %d, want 431", len(huge), code)
	}
	// ... and the handler itself, mounted on any server.
	req := httptest.NewRequest("GET", "/api/v1/runs", nil)
	req.Header.Set("Authorization", "Bearer "+limitsToken)
	for i := range 40 {
		req.Header.Add(fmt.Sprintf("X-Pad-%d", i), strings.Repeat("p", 2<<10))
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("headers of 80 KiB through ServeHTTP: %d, want 431", rec.Code)
	}
	// Within the bounds, the same requests work.
	if code, _, body := call(t, "GET", base+"/api/v1/runs/"+run.ID, limitsToken, nil, http.Header{"X-Padding": {"small"}}); code != http.StatusOK {
		t.Errorf("a normal request: %d %s", code, body)
	}
}

// A download names a file of an output's manifest; no path, however
// encoded, reaches another object of the store or a file of the machine.
func TestDownloadPathsStayInTheArtifact(t *testing.T) {
	_, base, run := limitsServer(t)
	a, _ := run.Node("a")
	files := base + "/api/v1/runs/" + run.ID + "/nodes/a/outputs/out/files/"
	if code, _, body := call(t, "GET", files+"out.txt", limitsToken, nil, nil); code != http.StatusOK || body != "secret-free" {
		t.Fatalf("the output's file: %d %q", code, body)
	}
	record := "nodes/" + a.Key + ".json" // an object of the store outside the artifact
	for _, p := range []string{
		"..%2F..%2F" + url.PathEscape(record), "%2E%2E/%2E%2E/" + record, "../../" + record,
		"..%2f..%2f..%2f..%2f..%2f..%2fetc%2fpasswd", "%2Fetc%2Fpasswd", "/etc/passwd", "out.txt%00.json",
		"..\\..\\" + record, "out.txt/..", "%252e%252e%252f" + record,
	} {
		code, _, body := call(t, "GET", files+p, limitsToken, nil, nil)
		if code == http.StatusOK || strings.Contains(body, `"key"`) || strings.Contains(body, "root:") {
			t.Errorf("GET files/%s: %d %.200s; want a refusal", p, code, body)
		}
	}
}
