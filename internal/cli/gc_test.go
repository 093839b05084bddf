package cli

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// nerflow gc --dry-run says what would go and deletes nothing; nerflow gc
// then deletes the older run of the pipeline, and keeps the newest.
func TestGCCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	writeSpec(t, dir, cliSpec)
	cli := pipelineCLI(ctx, t, dir)
	cli("run", "spec.yaml", "--no-progress")
	cli("run", "spec.yaml", "--no-progress", "--set", "train.scale=2")
	files := func() int {
		n := 0
		_ = filepath.Walk(filepath.Join(dir, ".nerflow", "store"), func(_ string, fi os.FileInfo, err error) error {
			if err == nil && !fi.IsDir() {
				n++
			}
			return nil
		})
		return n
	}
	before := files()
	out := cli("gc", "--dry-run", "--keep-runs", "1", "--min-age", "0s")
	// The first run's 4 nodes computed what the second did not reuse:
	// train[seed=1..3] and total (text is the second run's cache hit).
	for _, want := range []string{`(?m)^artifact +4 `, `(?m)^node-record +4 `, `(?m)^run +1 `, `would delete 9 objects`, `kept: 1 run with its outputs`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("gc --dry-run lacks %q:\n%s", want, out)
		}
	}
	if files() != before {
		t.Fatalf("gc --dry-run deleted %d files", before-files())
	}
	if out := cli("gc", "--dry-run", "--keep-runs", "1"); !strings.Contains(out, "would delete 0 objects") {
		t.Errorf("gc --dry-run with the default --min-age (1h) would delete objects written just now:\n%s", out)
	}
	out = cli("gc", "--keep-runs", "1", "--min-age", "0s")
	if !strings.Contains(out, "deleted ") || files() >= before {
		t.Errorf("gc: %d files before, %d after:\n%s", before, files(), out)
	}
	runs := cli("runs")
	if n := strings.Count(runs, "\n") - 1; n != 1 {
		t.Errorf("after gc --keep-runs 1, runs lists %d runs:\n%s", n, runs)
	}
	// The newest run's outputs are all there.
	newest := strings.Fields(strings.Split(runs, "\n")[1])[0]
	if got := cli("artifacts", "get", newest, "total", "total"); !strings.Contains(got, `"total": 27`) {
		t.Errorf("the kept run's total: %s", got)
	}
}
