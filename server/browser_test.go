package server_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromium finds Debian's chromium (scripts/setup.sh installs it). Without
// it the browser test is skipped, except under `make test`
// (NERFLOW_TEST_REQUIRE_SERVICES=1), where it fails.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("NERFLOW_TEST_REQUIRE_SERVICES") == "1" {
		t.Fatal("chromium is not installed but NERFLOW_TEST_REQUIRE_SERVICES=1: scripts/setup.sh installs Debian's chromium")
	}
	t.Skip("chromium is not installed (scripts/setup.sh installs it); skipping the dashboard test")
	return ""
}

// screenshotDir is where the pages' screenshots go: out/screenshots at the
// repository root (git-ignored), or $NERFLOW_SCREENSHOTS.
func screenshotDir(t *testing.T) string {
	dir := os.Getenv("NERFLOW_SCREENSHOTS")
	if dir == "" {
		dir = filepath.Join("..", "out", "screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestDashboardInChromium signs in to the dashboard in headless Chromium,
// watches a run live and cancels it from its page, looks at a finished
// run's DAG, training curves, evaluations, node logs, and tags a text on
// the predict page; it checks each page's content in the DOM and saves a
// screenshot of each.
func TestDashboardInChromium(t *testing.T) {
	exe := chromium(t)
	s := newStack(t, true)
	done := s.submit("tiny.yaml")
	if r := s.wait(done); r.State != "succeeded" {
		t.Fatalf("run %s: %s", r.State, r.Error)
	}
	s.promote("tiny@1")
	live := s.submit("slow.yaml", "work.step_time=400ms")
	dir := screenshotDir(t)

	opts := append([]chromedp.ExecAllocatorOption{}, chromedp.DefaultExecAllocatorOptions[:]...)
	opts = append(opts, chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 1000))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	bctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	// A deadline for the whole session (it also stops the browser).
	ctx, cancel := context.WithTimeout(bctx, 3*time.Minute)
	defer cancel()
	b := &browser{t: t, ctx: ctx, dir: dir}

	// Sign in: the dashboard redirects to the login page.
	b.do("open", chromedp.Navigate(s.url+"/"), chromedp.WaitVisible(chromedp.CSS("#token")))
	if u := value(b, chromedp.Location()); !strings.HasSuffix(u, "/login") {
		t.Errorf("the dashboard without a session went to %s, not /login", u)
	}
	b.do("login", chromedp.SendKeys(chromedp.CSS("#token"), s.token))
	b.shot("01-login.png")
	b.do("sign in", chromedp.Submit(chromedp.CSS("#token")), chromedp.WaitVisible(chromedp.CSS("#runs tbody a")))

	// The runs list shows both runs.
	b.do("runs", chromedp.Poll[chromedp.Void](`document.querySelectorAll("#runs tbody tr").length >= 2`))
	b.shot("02-runs.png")
	runsText := value(b, chromedp.Text(chromedp.CSS("#runs tbody")))
	if !strings.Contains(runsText, done) || !strings.Contains(runsText, live) || !strings.Contains(runsText, "succeeded") {
		t.Errorf("runs list:\n%s", runsText)
	}

	// A spec submitted from the runs page's form opens its run.
	slowSpec, err := os.ReadFile("testdata/slow.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b.do("submit form", chromedp.Click(chromedp.CSS("button.plain")), chromedp.WaitVisible(chromedp.CSS("form textarea")),
		chromedp.SetValue(chromedp.CSS("form textarea"), string(slowSpec)),
		chromedp.SendKeys(chromedp.CSS("form input"), "work.step_time=10ms"), chromedp.Click(chromedp.CSS(`form button[type="submit"]`)),
		chromedp.Poll[chromedp.Void](`location.hash.startsWith("#/runs/2")`), chromedp.WaitVisible(chromedp.CSS(`g.node[data-node="prepare"]`)))
	if h := value(b, chromedp.Evaluate[string](`location.hash`)); strings.Contains(h, live) || strings.Contains(h, done) {
		t.Errorf("the form's run is %s", h)
	}

	// The live run: its slow nodes are seen running, then cancelled from
	// the page.
	b.hash("#/runs/" + live)
	b.do("live run", chromedp.Poll[chromedp.Void](`[...document.querySelectorAll("g.node")].some(g => g.dataset.state === "running" && g.dataset.node.startsWith("work"))`),
		chromedp.Click(chromedp.CSS(`g.node[data-node="work[steps=30]"]`)), chromedp.WaitVisible(chromedp.CSS("#node .progress")))
	b.shot("03-run-live.png")
	b.do("cancel", chromedp.Click(chromedp.CSS("button.danger")), chromedp.WaitVisible(chromedp.CSS(`g.node[data-state="cancelled"]`)))
	states := value(b, chromedp.Evaluate[string](`[...document.querySelectorAll("g.node")].map(g => g.dataset.node + "=" + g.dataset.state).join(" ")`))
	if !strings.Contains(states, "work[steps=30]=cancelled") {
		t.Errorf("after cancel from the dashboard: %s", states)
	}

	// The finished run: DAG, curves per training node, evaluations per
	// type, and a node's logs.
	b.hash("#/runs/" + done)
	b.do("finished run", chromedp.WaitVisible(chromedp.CSS(`[data-eval="eval[seed=2]"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-curve="train[seed=2]"] svg`)), chromedp.WaitVisible(chromedp.CSS(`[data-eval="eval[seed=1]"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-curve="train[seed=1]"] svg`)),
		chromedp.Click(chromedp.CSS(`g.node[data-node="train[seed=1]"]`)),
		chromedp.Poll[chromedp.Void](`(document.querySelector("#node pre.logs") || {}).textContent?.includes("INFO")`))
	b.shot("04-run.png")
	nodes, doneNodes := b.count("g.node"), b.count(`g.node[data-state="done"]`)
	curves, evals := b.count("[data-curve] path.f1"), b.count("[data-eval] tbody tr")
	if nodes != 8 || doneNodes != 8 || curves != 2 || evals != 6 {
		t.Errorf("run page: %d nodes (%d done), %d dev-F1 curves, %d evaluation rows", nodes, doneNodes, curves, evals)
	}
	evalText := value(b, chromedp.Text(chromedp.CSS(`[data-eval="eval[seed=1]"]`)))
	for _, want := range []string{"PER", "LOC", "micro"} {
		if !strings.Contains(evalText, want) {
			t.Errorf("evaluation card lacks %q:\n%s", want, evalText)
		}
	}

	// Predict: the text is tagged through POST /v1/predict.
	b.hash("#/predict")
	b.do("predict", chromedp.WaitVisible(chromedp.CSS("#tag")), chromedp.Click(chromedp.CSS("#tag")), chromedp.WaitVisible(chromedp.CSS("#annotated")))
	b.shot("05-predict.png")
	if b.count("#annotated .entity") == 0 {
		t.Log("the tiny model found no entity in the sample text (accuracy is not asserted)")
	}

	// Workers and models list what the server has; a nightly schedule is
	// added from the schedules page's form.
	b.hash("#/workers")
	b.do("workers", chromedp.WaitVisible(chromedp.CSS(`tr[data-key="test/cpu"]`)))
	b.shot("06-workers.png")
	specFile, _ := filepath.Abs("testdata/tiny.yaml")
	b.hash("#/schedules")
	b.do("schedule", chromedp.WaitVisible(chromedp.CSS("#sched-name")), chromedp.SendKeys(chromedp.CSS("#sched-name"), "nightly"),
		chromedp.SendKeys(chromedp.CSS("#sched-spec"), specFile), chromedp.SendKeys(chromedp.CSS("#sched-set"), "train.epochs=2"),
		chromedp.Click(chromedp.CSS("#sched-add")), chromedp.WaitVisible(chromedp.CSS(`tr[data-key="nightly"]`)))
	b.shot("07-schedules.png")
	if text := value(b, chromedp.Text(chromedp.CSS(`tr[data-key="nightly"]`))); !strings.Contains(text, "0 2 * * *") || !strings.Contains(text, "train.epochs=2") {
		t.Errorf("schedule row: %q", text)
	}
	b.hash("#/models")
	b.do("models", chromedp.WaitVisible(chromedp.CSS(`tr[data-key="tiny@1"]`)))
	b.shot("08-models.png")

	// Promote tiny@2 from the models page: the tag moves in the registry.
	b.hash("#/models")
	b.do("promote", chromedp.WaitVisible(chromedp.CSS(`tr[data-key="tiny@2"] button`)), chromedp.Click(chromedp.CSS(`tr[data-key="tiny@2"] button`)),
		// The tags cell (the second column), not the tag picker's options.
		chromedp.Poll[chromedp.Void](`(document.querySelector('tr[data-key="tiny@2"] td:nth-child(2)') || {}).textContent === "production"`))
	b.shot("09-models-promoted.png")
	if _, err := s.watcher.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.hash("#/predict")
	b.do("predict again", chromedp.WaitVisible(chromedp.CSS("#tag")), chromedp.Click(chromedp.CSS("#tag")),
		chromedp.Poll[chromedp.Void](`(document.querySelector("#served-by") || {}).textContent?.includes("tiny 2")`))
	t.Logf("screenshots in %s", dir)
}

// browser runs chromedp steps, failing the test on the first error.
type browser struct {
	t   *testing.T
	ctx context.Context
	dir string
}

func (b *browser) do(step string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", step, err)
	}
}

func value[T any](b *browser, a chromedp.Action[T]) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, a)
	if err != nil {
		b.t.Fatal(err)
	}
	return v
}

// hash moves the single-page app to another page.
func (b *browser) hash(h string) { value(b, chromedp.Evaluate[string](`location.hash = "`+h+`"`)) }

func (b *browser) count(sel string) int {
	return value(b, chromedp.Evaluate[int](`document.querySelectorAll(`+"`"+sel+"`"+`).length`))
}

// shot saves a full-page PNG screenshot.
func (b *browser) shot(name string) {
	b.t.Helper()
	png := value(b, chromedp.FullScreenshot(100))
	if err := os.WriteFile(filepath.Join(b.dir, name), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}
