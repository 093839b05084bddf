package cli

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nerflow/nerflow/pipeline/engine"
)

// A nerflow worker whose last node has ended returns memory to the system
// and says so.
func TestWorkerReturnsMemoryWhenIdle(t *testing.T) {
	c := newClusterEnv(t)
	_, logPath := c.workerWithLog(t, "idle")
	id := c.submit(t, "name: idle\nnodes:\n  text: {stage: test.emit, params: {text: idle}}\n")
	st := c.waitFor(t, id, "the run finishing", func(st *engine.RunStatus) bool { return st.State != engine.Running })
	if st.State != engine.Succeeded {
		t.Fatalf("run %s: %s %s", id, st.State, st.Error)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		b, err := os.ReadFile(logPath)
		if err != nil {
			t.Fatal(err)
		}
		if line := grepLine(string(b), "worker idle: memory returned"); line != "" {
			if !strings.Contains(line, "resident_after_mib=") || !strings.Contains(line, "allocator=") {
				t.Errorf("the line says neither the allocator nor the resident size: %s", line)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker ran the node and never returned memory; its log:\n%s", b)
		}
	}
}

func grepLine(text, s string) string {
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, s) {
			return line
		}
	}
	return ""
}
