package server_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/nerflow/nerflow/pipeline/engine"
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
// watches a run live and cancels it from its page, sees a node whose
// worker died shown as lost until it is done, looks at a finished run's
// DAG, training curves, evaluations (in percent), node logs and outputs (in
// binary units), tags a text on the predict page, and looks at a model's
// page; it checks each page's content in the DOM, that no page is wider
// than a 1280 or 1400 px window, and saves a screenshot of each.
func TestDashboardInChromium(t *testing.T) {
	exe := chromium(t)
	// No re-drive of lost nodes: the worker this test plays dead is alive
	// and finishes its node, so that the lost state stays on screen until
	// then instead of racing a re-drive.
	s := newStack(t, true, func(o *engine.WorkerOptions) { o.ReconcileInterval = time.Hour })
	done := s.submit("tiny.yaml")
	if r := s.wait(done); r.State != "succeeded" {
		t.Fatalf("run %s: %s", r.State, r.Error)
	}
	s.promote("tiny@1")
	failed := s.submit("fail.yaml")
	if r := s.wait(failed); r.State != "failed" {
		t.Fatalf("run %s: %s", failed, r.State)
	}
	// Enough runs for two pages of the runs list (all but the first are
	// cache hits, done at once).
	for range 24 {
		s.submit("slow.yaml", "work.step_time=1ms")
	}
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
	b.acceptDialogs()
	b.do("login", chromedp.SendKeys(chromedp.CSS("#token"), s.token))
	b.shot("01-login.png")
	b.do("sign in", chromedp.Submit(chromedp.CSS("#token")), chromedp.WaitVisible(chromedp.CSS("#runs tbody a")))

	// The runs list shows both runs.
	b.do("runs", chromedp.Poll[chromedp.Void](`document.querySelectorAll("#runs tbody tr").length === 25`))
	b.fits("runs")
	b.shot("02-runs.png")
	runsText := value(b, chromedp.Text(chromedp.CSS("#runs tbody")))
	if !strings.Contains(runsText, live) || !strings.Contains(runsText, "by hand") {
		t.Errorf("runs list:\n%s", runsText)
	}
	// Paging, newest first: the oldest run is on the second page.
	if v := value(b, chromedp.Text(chromedp.CSS("#run-page"))); v != "1–25 of 27" {
		t.Errorf("runs pager: %q, want 1–25 of 27", v)
	}
	b.do("runs page 2", chromedp.Click(chromedp.CSS("#run-next")), chromedp.WaitVisible(chromedp.CSS(`#runs tr[data-key="`+done+`"]`)))
	if n := b.count("#runs tbody tr"); n != 2 {
		t.Errorf("the second page of runs has %d rows, want 2", n)
	}
	// Filters: by state, and a search for a run's id.
	b.do("runs by state", chromedp.SetValue(chromedp.CSS("#run-state"), "failed"), chromedp.Evaluate[chromedp.Void](`document.querySelector("#run-state").dispatchEvent(new Event("change"))`),
		chromedp.Poll[chromedp.Void](`document.querySelectorAll("#runs tbody tr").length === 1`))
	if text := value(b, chromedp.Text(chromedp.CSS("#runs tbody"))); !strings.Contains(text, failed) {
		t.Errorf("the failed runs: %q, want %s", text, failed)
	}
	b.do("runs search", chromedp.SetValue(chromedp.CSS("#run-state"), ""), chromedp.SendKeys(chromedp.CSS("#run-search"), done[len(done)-6:]),
		chromedp.Poll[chromedp.Void](`document.querySelectorAll("#runs tbody tr").length === 1`))
	if text := value(b, chromedp.Text(chromedp.CSS("#runs tbody"))); !strings.Contains(text, done) || !strings.Contains(text, "succeeded") {
		t.Errorf("searching the runs for %s: %q", done[len(done)-6:], text)
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
	b.fits("live run")
	b.shot("03-run-live.png")
	b.do("cancel", chromedp.Click(chromedp.CSS("button.danger")), chromedp.WaitVisible(chromedp.CSS(`g.node[data-state="cancelled"]`)))
	states := value(b, chromedp.Evaluate[string](`[...document.querySelectorAll("g.node")].map(g => g.dataset.node + "=" + g.dataset.state).join(" ")`))
	if !strings.Contains(states, "work[steps=30]=cancelled") {
		t.Errorf("after cancel from the dashboard: %s", states)
	}

	// A worker that died mid-node, as after kill -9: its process is gone
	// (no server of that pid beats) and its record of the node, started a
	// minute ago, stays. The page shows the node lost, with a warning and
	// its progress frozen, live, and then done.
	lost := s.submit("slow.yaml", "work.step_time=300ms")
	s.waitNode(lost, "work[steps=30]", func(n *engine.NodeStatus) bool { return n.Progress != nil })
	nodeKey := s.ns + ":{" + lost + "}:node:work[steps=30]"
	// Its task id is one asynq no longer knows either: the worker that
	// really runs the node lists its own task at every heartbeat, and a
	// listed task is never lost (the state would flip back within 5 s).
	if err := s.rdb.HSet(context.Background(), nodeKey, "pid", "0", "task", "killed-"+lost, "started_at", time.Now().Add(-time.Minute).UTC().Format(time.RFC3339Nano)).Err(); err != nil {
		t.Fatal(err)
	}
	b.hash("#/runs/" + lost)
	b.do("lost node", chromedp.WaitVisible(chromedp.CSS(`g.node[data-node="work[steps=30]"][data-state="lost"]`)), chromedp.WaitVisible(chromedp.CSS("#lost")),
		chromedp.Click(chromedp.CSS(`g.node[data-node="work[steps=30]"]`)), chromedp.WaitVisible(chromedp.CSS("#node .progress.lost")))
	b.shot("04-run-lost.png")
	if text := value(b, chromedp.Text(chromedp.CSS("#node"))); !strings.Contains(text, "worker lost") || !strings.Contains(text, "waiting to be re-run") {
		t.Errorf("the lost node's detail:\n%s", text)
	}
	if text := value(b, chromedp.Text(chromedp.CSS("#lost"))); !strings.Contains(text, "work[steps=30]") {
		t.Errorf("the lost node's warning: %q", text)
	}
	b.do("lost node done", chromedp.WaitVisible(chromedp.CSS(`g.node[data-node="work[steps=30]"][data-state="done"]`)))
	if b.count("#lost") != 0 {
		t.Error("the warning of a lost node stays after it is done")
	}

	// A training's curve grows while it runs, from the epochs it logs.
	training := s.submit("tiny.yaml", "train.epochs=1000")
	b.hash("#/runs/" + training)
	b.do("live curve", chromedp.Poll[chromedp.Void](`[...document.querySelectorAll('[data-curve="train[seed=1]"].live circle.loss')].length >= 2`, chromedp.WithPollingTimeout(time.Minute)))
	first := value(b, chromedp.Evaluate[int](`+document.querySelector('[data-curve="train[seed=1]"].live [data-epochs]').dataset.epochs`))
	b.do("live curve grows", chromedp.Poll[chromedp.Void](`+document.querySelector('[data-curve="train[seed=1]"].live [data-epochs]').dataset.epochs > `+strconv.Itoa(first), chromedp.WithPollingTimeout(time.Minute)))
	b.shot("04-run-live-curve.png")
	if text := value(b, chromedp.Text(chromedp.CSS(`[data-curve="train[seed=1]"]`))); !strings.Contains(text, "of 1000") || !strings.Contains(text, "dev F1") {
		t.Errorf("live curve card: %q", text)
	}
	if code, body := s.do("POST", "/api/v1/runs/"+training+"/cancel", nil, true); code != 200 {
		t.Fatalf("cancel the long training: %d %s", code, body)
	}

	// The finished run: DAG, curves per training node, evaluations per
	// type, and a node's logs.
	b.hash("#/runs/" + done)
	b.do("finished run", chromedp.WaitVisible(chromedp.CSS(`[data-eval="eval[seed=2]"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-curve="train[seed=2]"] svg`)), chromedp.WaitVisible(chromedp.CSS(`[data-eval="eval[seed=1]"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-curve="train[seed=1]"] svg`)),
		chromedp.Click(chromedp.CSS(`g.node[data-node="train[seed=1]"]`)),
		chromedp.Poll[chromedp.Void](`(document.querySelector("#node pre.logs") || {}).textContent?.includes("INFO")`))
	b.fits("finished run")
	b.shot("05-run.png")
	nodes, doneNodes := b.count("g.node"), b.count(`g.node[data-state="done"]`)
	curves, evals := b.count("[data-curve] path.f1"), b.count("[data-eval] tbody tr")
	if nodes != 8 || doneNodes != 8 || curves != 2 || evals != 6 {
		t.Errorf("run page: %d nodes (%d done), %d dev-F1 curves, %d evaluation rows", nodes, doneNodes, curves, evals)
	}
	evalText := value(b, chromedp.Text(chromedp.CSS(`[data-eval="eval[seed=1]"]`)))
	for _, want := range []string{"PER", "LOC", "micro", "F1 %"} {
		if !strings.Contains(evalText, want) {
			t.Errorf("evaluation card lacks %q:\n%s", want, evalText)
		}
	}
	// Scores in percent with two decimals, as the CLI prints them; sizes
	// in binary units, as the CLI's.
	percent := regexp.MustCompile(`^\d{1,3}\.\d\d$`)
	for _, sel := range []string{`[data-eval="eval[seed=1]"] tbody tr:last-child td:nth-child(4)`, `[data-eval="eval[seed=1]"] tbody tr:first-child td:nth-child(2)`} {
		if v := value(b, chromedp.Text(chromedp.CSS(sel))); !percent.MatchString(v) {
			t.Errorf("score %q is not a percentage (%s)", v, sel)
		}
	}
	sizes := strings.Split(value(b, chromedp.Evaluate[string](`[...document.querySelectorAll("#node table td.num")].map(td => td.textContent).join("|")`)), "|")
	human := regexp.MustCompile(`^\d+(\.\d)? (B|KiB|MiB|GiB)$`)
	for _, v := range sizes {
		if !human.MatchString(v) {
			t.Errorf("output size %q is not in binary units (all: %q)", v, sizes)
		}
	}

	// Predict: the text is tagged through POST /v1/predict.
	b.hash("#/predict")
	b.do("predict", chromedp.WaitVisible(chromedp.CSS("#tag")), chromedp.Click(chromedp.CSS("#tag")), chromedp.WaitVisible(chromedp.CSS("#annotated")))
	b.fits("predict")
	b.shot("06-predict.png")
	if b.count("#annotated .entity") == 0 {
		t.Log("the tiny model found no entity in the sample text (accuracy is not asserted)")
	}

	// Workers and models list what the server has; a nightly schedule is
	// added from the schedules page's form.
	b.hash("#/workers")
	b.do("workers", chromedp.WaitVisible(chromedp.CSS(`tr[data-key="test/cpu"]`)), chromedp.WaitVisible(chromedp.CSS(`tr[data-key="test-gpu/gpu"]`)))
	b.fits("workers")
	b.shot("07-workers.png")
	// Queues: counts per queue, and the failed run's archived task,
	// deleted from the page.
	b.hash("#/queues")
	b.do("queues", chromedp.WaitVisible(chromedp.CSS(`#queues tr[data-key="cpu"]`)), chromedp.WaitVisible(chromedp.CSS(`#queues tr[data-key="gpu"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#archived tr[data-key="`+failed+`/bad"]`)))
	b.fits("queues")
	b.shot("08-queues.png")
	if text := value(b, chromedp.Text(chromedp.CSS(`#archived tr[data-key="`+failed+`/bad"]`))); !strings.Contains(text, "no such gazetteer") || !strings.Contains(text, "Retry run") {
		t.Errorf("archived task row: %q", text)
	}
	if v := value(b, chromedp.Text(chromedp.CSS(`#queues tr[data-key="cpu"] td:nth-child(6)`))); v != "1" {
		t.Errorf("the cpu queue shows %q archived tasks, want 1", v)
	}
	b.do("delete archived", chromedp.Click(chromedp.CSS(`#archived tr[data-key="`+failed+`/bad"] button.danger`)),
		chromedp.Poll[chromedp.Void](`!document.querySelector("#archived tr") && document.querySelector('#queues tr[data-key="cpu"] td:nth-child(6)').textContent === "0"`))

	specFile, _ := filepath.Abs("testdata/tiny.yaml")
	b.hash("#/schedules")
	b.do("schedule", chromedp.WaitVisible(chromedp.CSS("#sched-name")), chromedp.SendKeys(chromedp.CSS("#sched-name"), "nightly"),
		chromedp.SendKeys(chromedp.CSS("#sched-spec"), specFile), chromedp.SendKeys(chromedp.CSS("#sched-set"), "train.epochs=2"),
		chromedp.Click(chromedp.CSS("#sched-add")), chromedp.WaitVisible(chromedp.CSS(`tr[data-key="nightly"]`)))
	b.fits("schedules")
	b.shot("09-schedules.png")
	if text := value(b, chromedp.Text(chromedp.CSS(`tr[data-key="nightly"]`))); !strings.Contains(text, "0 2 * * *") || !strings.Contains(text, "--set train.epochs=2") {
		t.Errorf("schedule row: %q", text)
	}
	// A schedule's page: its settings and its (so far empty) tick history.
	b.do("schedule page", chromedp.Click(chromedp.CSS(`tr[data-key="nightly"] a`)), chromedp.WaitVisible(chromedp.CSS("dl.kv")))
	if text := value(b, chromedp.Text(chromedp.CSS("#view"))); !strings.Contains(text, "Schedule nightly") || !strings.Contains(text, "No tick yet.") || !strings.Contains(text, "--set train.epochs=2") {
		t.Errorf("schedule page:\n%s", text)
	}
	b.hash("#/models")
	b.do("models", chromedp.WaitVisible(chromedp.CSS(`tr[data-key="tiny@1"]`)))
	b.fits("models")
	b.shot("10-models.png")
	if v := value(b, chromedp.Text(chromedp.CSS(`tr[data-key="tiny@1"] td:nth-child(3)`))); !percent.MatchString(v) {
		t.Errorf("the models list's F1 %q is not a percentage", v)
	}

	// Promote tiny@2 from the models page: the tag moves in the registry.
	b.hash("#/models")
	b.do("promote", chromedp.WaitVisible(chromedp.CSS(`tr[data-key="tiny@2"] button`)), chromedp.Click(chromedp.CSS(`tr[data-key="tiny@2"] button`)),
		// The tags cell (the second column), not the tag picker's options.
		chromedp.Poll[chromedp.Void](`(document.querySelector('tr[data-key="tiny@2"] td:nth-child(2)') || {}).textContent === "production"`))
	b.shot("11-models-promoted.png")

	// A model's page: its versions and tags, lineage back to the run that
	// trained it, its files and its evaluations.
	b.do("model page", chromedp.Click(chromedp.CSS(`tr[data-key="tiny@2"] a`)), chromedp.WaitVisible(chromedp.CSS(`#versions tr.current[data-key="tiny@2"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#versions tr[data-key="tiny@1"]`)), chromedp.WaitVisible(chromedp.CSS("#lineage a")), chromedp.WaitVisible(chromedp.CSS("[data-eval] tbody tr")))
	b.fits("model")
	b.shot("12-model.png")
	lineage := value(b, chromedp.Text(chromedp.CSS("#lineage")))
	for _, want := range []string{done, "train.tagger v", `"seed"`} {
		if !strings.Contains(lineage, want) {
			t.Errorf("model page's lineage lacks %q:\n%s", want, lineage)
		}
	}
	if text := value(b, chromedp.Text(chromedp.CSS("#versions"))); !strings.Contains(text, "production") {
		t.Errorf("model page's versions lack the production tag:\n%s", text)
	}
	for _, v := range strings.Split(value(b, chromedp.Evaluate[string](`[...document.querySelectorAll("#files td.num")].map(td => td.textContent).join("|")`)), "|") {
		if !human.MatchString(v) {
			t.Errorf("model file size %q is not in binary units", v)
		}
	}
	b.do("model's run", chromedp.Click(chromedp.CSS("#lineage dd a")), chromedp.WaitVisible(chromedp.CSS("g.node")))
	if h := value(b, chromedp.Evaluate[string](`location.hash`)); h != "#/runs/"+done {
		t.Errorf("the model's run link went to %s, want #/runs/%s", h, done)
	}
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

// fits checks that the page needs no horizontal scrolling in a window 1280
// or 1400 px wide, then gives the window its size back.
func (b *browser) fits(page string) {
	b.t.Helper()
	for _, w := range []int64{1280, 1400} {
		b.do("viewport", chromedp.EmulateViewport(w, 1000))
		if over := value(b, chromedp.Evaluate[int](`document.documentElement.scrollWidth - window.innerWidth`)); over > 0 {
			b.t.Errorf("the %s page is %d px wider than a %d px window", page, over, w)
		}
	}
	b.do("viewport", chromedp.ResetViewport())
}

// acceptDialogs accepts every confirmation the page asks for (delete
// buttons), as a user would.
func (b *browser) acceptDialogs() {
	go func() {
		for _, err := range chromedp.Events(b.ctx, page.JavascriptDialogOpening) {
			if err != nil {
				return
			}
			// Answered from another goroutine than the one receiving events.
			go func() {
				_ = chromedp.Do(b.ctx, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
					_, err := cdp.Call(ctx, t, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
					return err
				}))
			}()
		}
	}()
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
