// Package scripts holds the machine set-up scripts; its test checks what
// each set-up profile would install, without installing anything.
package scripts

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// dryRun runs setup.sh --dry-run with an empty cache and returns what it
// says it would do.
func dryRun(t *testing.T, args ...string) string {
	t.Helper()
	cache := t.TempDir()
	cmd := exec.Command("bash", append([]string{"setup.sh", "--dry-run"}, args...)...)
	cmd.Env = append(os.Environ(), "NERFLOW_CACHE="+cache, "LIBTORCH=", "NERFLOW_SKIP_MINIO=", "NERFLOW_SKIP_EMBEDDINGS=", "NERFLOW_SKIP_CHROMIUM=", "NERFLOW_WITH_BENCH=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("setup.sh --dry-run %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if left, _ := os.ReadDir(cache); len(left) > 0 {
		t.Errorf("setup.sh --dry-run %s wrote %d entries into the cache", strings.Join(args, " "), len(left))
	}
	return string(out)
}

// `make run` sets up only what the main job needs (no Redis, MinIO, Brown
// corpus or Chromium); `make test` sets up everything.
func TestSetupProfiles(t *testing.T) {
	if out, err := exec.Command("bash", "-n", "setup.sh").CombinedOutput(); err != nil {
		t.Fatalf("bash -n setup.sh: %v\n%s", err, out)
	}
	run := dryRun(t, "run")
	for _, want := range []string{"needs Debian packages: libopenblas0-pthread libjemalloc2 libtorch-dev\n",
		"would fetch word vectors", "would adapt gotch", "ready for make run (dry run"} {
		if !strings.Contains(run, want) {
			t.Errorf("setup.sh run does not say %q:\n%s", want, run)
		}
	}
	for _, not := range []string{"MinIO", "Brown", "chromium", "redis-server", "curl"} {
		if strings.Contains(run, not) {
			t.Errorf("setup.sh run would set up %s, which the main job does not need:\n%s", not, run)
		}
	}
	all := dryRun(t)
	for _, want := range []string{"needs Debian packages: libopenblas0-pthread libjemalloc2 libtorch-dev redis-server curl\n",
		"would build MinIO", "would fetch word vectors", "would fetch the Brown corpus", "ready for make run and make test"} {
		if !strings.Contains(all, want) {
			t.Errorf("setup.sh (all) does not say %q:\n%s", want, all)
		}
	}
	if out, err := exec.Command("bash", "setup.sh", "tests").CombinedOutput(); err == nil || !strings.Contains(string(out), "usage:") {
		t.Errorf("setup.sh tests (no such profile): %v\n%s", err, out)
	}

	// The Makefile's targets call the profiles (make -n prints, runs nothing).
	for target, want := range map[string]string{"run": "scripts/setup.sh run\n", "build": "scripts/setup.sh run\n", "test": "scripts/setup.sh all\n"} {
		out, err := exec.Command("make", "-n", "-C", "..", target).CombinedOutput()
		if err != nil {
			t.Fatalf("make -n %s: %v\n%s", target, err, out)
		}
		if !strings.Contains(string(out), want) {
			t.Errorf("make %s does not run %q:\n%s", target, strings.TrimSpace(want), out)
		}
	}
}
