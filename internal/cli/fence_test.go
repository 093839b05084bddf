package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nerflow/nerflow/internal/testenv"
	"github.com/nerflow/nerflow/pipeline/engine"
	"github.com/nerflow/nerflow/storage"
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
	if err := a.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	continued = true
	checkLateAttemptFenced(t, c, id, st, aLog, "SIGCONT")
}

// TestCutOffWorkerLateCommit cuts a worker process off from Redis (its
// connection goes through a proxy that drops everything) while it runs a
// node: it keeps computing and finishes, but cannot commit without
// confirming its claim in Redis. Another worker re-runs the node and the
// run succeeds; when the connection is back, the first one's commit is
// fenced off.
func TestCutOffWorkerLateCommit(t *testing.T) {
	c := newClusterEnv(t)
	proxy := newCuttableProxy(t, testenv.Redis(t))
	ca := *c
	ca.env = append(slices.Clone(c.env), "NERFLOW_REDIS_ADDR="+proxy.addr())
	_, aLog := ca.workerWithLog(t, "a", "--node-lease", "2s")
	id := c.submit(t, fmt.Sprintf(resumableSpec, "cutoff"))
	c.waitFor(t, id, "slow reaching step 5", func(st *engine.RunStatus) bool { return slowProgress(st) >= 5 })
	proxy.cut(true)
	cut := time.Now()
	restored := false
	defer func() {
		if !restored {
			proxy.cut(false)
		}
	}()
	c.worker(t, "b", "--node-lease", "2s", "--reconcile-interval", "500ms")
	st := c.waitFor(t, id, "the run finishing", func(st *engine.RunStatus) bool { return st.State != engine.Running })
	if st.State != engine.Succeeded {
		t.Fatalf("run %s: %s", st.State, st.Error)
	}
	t.Logf("worker cut off from Redis mid-node: run finished %s after the cut", time.Since(cut).Round(100*time.Millisecond))
	proxy.cut(false)
	restored = true
	checkLateAttemptFenced(t, c, id, st, aLog, "the connection came back")
}

// checkLateAttemptFenced waits for the late worker's log to say that its
// attempt was discarded, then checks that run and record hold the outputs
// of the attempt that finished the run, and that no other attempt's files
// are stored.
func checkLateAttemptFenced(t *testing.T, c *clusterEnv, id string, st *engine.RunStatus, lateLog, event string) {
	t.Helper()
	slow, _ := st.Node("slow")
	published := slow.Outputs["result"]
	since := time.Now()
	var logText string
	for time.Since(since) < 20*time.Second {
		b, _ := os.ReadFile(lateLog)
		logText = string(b)
		if strings.Contains(logText, "this attempt's are discarded") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(logText, "this attempt's are discarded") {
		t.Errorf("the late worker's log does not say its late commit was refused:\n%s", logText)
	} else {
		t.Logf("the late worker was fenced off %s after %s", time.Since(since).Round(100*time.Millisecond), event)
	}
	// Let it finish its task (it adopts the published outputs and
	// completes the node again, a repeat).
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
	objs, err := c.store.List(ctx, layout.AttemptOutputs(slow.Key, ""))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if !strings.HasPrefix(o.Key, published.Prefix+"/") {
			t.Errorf("a file of another attempt is stored: %s", o.Key)
		}
	}
	var r struct {
		ResumedFrom int64 `json:"resumed_from"`
	}
	if _, err := storage.GetJSON(ctx, c.store, published.Key("result.json"), &r); err != nil || r.ResumedFrom == 0 {
		t.Errorf("the published attempt resumed from step %d (%v), want the second worker's, resumed from a checkpoint", r.ResumedFrom, err)
	}
}

// cuttableProxy forwards TCP connections to a server until cut: then it
// drops every connection and refuses new ones (they are closed at once),
// as a network partition would, until it is restored.
type cuttableProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	conns  map[net.Conn]bool
}

func newCuttableProxy(t *testing.T, target string) *cuttableProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cuttableProxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	t.Cleanup(func() { ln.Close(); p.cut(true) })
	go p.serve()
	return p
}

func (p *cuttableProxy) addr() string { return p.ln.Addr().String() }

func (p *cuttableProxy) serve() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		if !down {
			p.conns[in] = true
		}
		p.mu.Unlock()
		if down {
			in.Close()
			continue
		}
		go p.forward(in)
	}
}

func (p *cuttableProxy) forward(in net.Conn) {
	out, err := net.Dial("tcp", p.target)
	if err != nil {
		in.Close()
		return
	}
	p.mu.Lock()
	p.conns[out] = true
	p.mu.Unlock()
	go func() { io.Copy(out, in); out.Close() }()
	io.Copy(in, out)
	in.Close()
}

// cut drops every connection and refuses new ones (down), or accepts
// them again.
func (p *cuttableProxy) cut(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		for c := range p.conns {
			c.Close()
		}
		clear(p.conns)
	}
}
