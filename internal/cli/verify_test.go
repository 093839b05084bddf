package cli

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/storage/fsstore"
)

// nerflow verify finds an output whose bytes rotted under their recorded
// digest (which nothing short of reading them shows), names it, exits
// non-zero, and with --drop makes the next run execute its node again.
func TestVerify(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	writeSpec(t, dir, cliSpec)
	cli := func(args ...string) (string, error) { return runPipelineCLI(ctx, t, dir, args...) }
	out, err := cli("run", "spec.yaml", "--no-progress")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	runID := regexp.MustCompile(`run (\S+) succeeded`).FindStringSubmatch(out)
	if runID == nil {
		t.Fatalf("no run id in:\n%s", out)
	}
	if out, err := cli("verify", runID[1]); err != nil || !strings.Contains(out, "checked 5 artifacts, 5 files") || !strings.Contains(out, ": 0 damaged") {
		t.Fatalf("verify of an intact run: %v\n%s", err, out)
	}

	st, err := fsstore.Open(dir + "/.nerflow/store")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := st.List(ctx, "artifacts/")
	if err != nil {
		t.Fatal(err)
	}
	var rotted string
	for _, o := range objs {
		if strings.HasSuffix(o.Key, "-out/out.txt") { // test.emit's output: the node "text"
			rotted = o.Key
		}
	}
	if rotted == "" {
		t.Fatalf("no output of node text among %v", objs)
	}
	path, _ := st.Path(rotted)
	b, _ := os.ReadFile(path)
	b[0] ^= 0x20
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}

	for _, args := range [][]string{{"verify", runID[1]}, {"verify"}} {
		out, err := cli(args...)
		if err == nil || !strings.Contains(err.Error(), "1 damaged") {
			t.Errorf("%s: err = %v, want 1 damaged\n%s", strings.Join(args, " "), err, out)
		}
		if !strings.Contains(out, "DAMAGED node text, output out") || !strings.Contains(out, "out.txt: storage: digest mismatch") ||
			!strings.Contains(out, strings.TrimSuffix(rotted, "/out.txt")) {
			t.Errorf("%s does not name the damaged artifact:\n%s", strings.Join(args, " "), out)
		}
	}
	if out, err := cli("verify", "--drop"); err == nil || !strings.Contains(out, "dropped 1 node records") {
		t.Errorf("verify --drop: %v\n%s", err, out)
	}
	// The next run executes text again; its content is the same, so the
	// rest stays cached.
	out, err = cli("run", "spec.yaml", "--no-progress")
	if err != nil || !strings.Contains(out, "5 nodes (1 done, 4 cached)") {
		t.Errorf("run after --drop: %v\n%s", err, out)
	}
	// The rotted copy is still in the store, but nothing refers to it.
	if out, err := cli("verify"); err != nil || !strings.Contains(out, ": 0 damaged") {
		t.Errorf("verify after the repair: %v\n%s", err, out)
	}
}
