package cli

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nerflow/nerflow/pipeline/engine"
	"github.com/nerflow/nerflow/storage/layout"
)

// TestStalledWorkerLateCommit stops a worker process (SIGSTOP) near the end
// of a long node, past its node lease; another worker re-runs the node and
// the run succeeds. When the stopped worker is continued, its late commit
// is fenced off: the node record and the run keep the other attempt's
// outputs, the late attempt's files are deleted, and its log says why.
func TestStalledWorkerLateCommit(t *testing.T) {
	c := newClusterEnv(t)
	a, aLog := c.workerWithLog(t, "a", "--node-lease", "2s")
	id := c.submit(t, fmt.Sprintf(resumableSpec, "stall"))
	c.waitFor(t, id, "slow reaching step 20", func(st *engine.RunStatus) bool { return slowProgress(st) >= 20 })
	if err := a.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	continued := false
	defer func() {
		if !continued {
			_ = a.Process.Signal(syscall.SIGCONT)
		}
	}()
	c.worker(t, "b", "--node-lease", "2s", "--reconcile-interval", "500ms")
	st := c.waitFor(t, id, "the run finishing", func(st *engine.RunStatus) bool { return st.State != engine.Running })
	if st.State != engine.Succeeded {
		t.Fatalf("run %s: %s", st.State, st.Error)
	}
	t.Logf("worker SIGSTOPped mid-node: run finished %s after the stop", time.Since(stopped).Round(100*time.Millisecond))
	slow, _ := st.Node("slow")
	published := slow.Outputs["result"]

	if err := a.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	continued = true
	woke := time.Now()
	var logText string
	for time.Since(woke) < 10*time.Second {
		b, _ := os.ReadFile(aLog)
		logText = string(b)
		if strings.Contains(logText, "late") && strings.Contains(logText, "this attempt's are discarded") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(logText, "this attempt's are discarded") {
		t.Errorf("the woken worker's log does not say its late commit was refused:\n%s", logText)
	} else {
		t.Logf("the woken worker was fenced off %s after SIGCONT:\n%s", time.Since(woke).Round(100*time.Millisecond), logText)
	}
	// Let the woken worker finish its task (it adopts the published
	// outputs and completes the node again, a repeat).
	time.Sleep(time.Second)

	ctx := context.Background()
	rec, err := c.eng.NodeRecord(ctx, slow.Key)
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.Outputs["result"]; got.Prefix != published.Prefix || got.Digest != published.Digest {
		t.Errorf("the node record holds %s (%s), the run published %s (%s): the late commit replaced it",
			got.Prefix, got.Digest, published.Prefix, published.Digest)
	}
	after, err := c.eng.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := after.Node("slow"); n.Outputs["result"].Prefix != published.Prefix {
		t.Errorf("after the late attempt, the run's outputs of slow are %s, were %s", n.Outputs["result"].Prefix, published.Prefix)
	}
	// Only the published attempt's files are left under the node key.
	objs, err := c.store.List(ctx, layout.AttemptOutputs(slow.Key, ""))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if !strings.HasPrefix(o.Key, published.Prefix+"/") {
			t.Errorf("a file of another attempt is stored: %s", o.Key)
		}
	}
	if r := resumedFrom(t, c, after); r < 20 {
		t.Errorf("the published attempt resumed from step %d, want >= 20 (the second worker's)", r)
	}
}
