package engine_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/nerflow/nerflow/internal/testenv"
	"github.com/nerflow/nerflow/pipeline/engine"
	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/storage/fsstore"
)

// The engine's own overhead, against real Redis and a file store, next to
// the same work done by bare asynq tasks (no DAG, no cache, no store) in
// the same run:
//
//	go test -run '^$' -bench . -benchtime 1x ./pipeline/engine/
//
// BenchmarkTransition reports the time from a node's completion to its
// child starting (ms/transition) along a chain of no-op nodes, and the
// ratio to a bare asynq task enqueuing its successor. BenchmarkDAG1000
// reports the wall time of a 1,000-node DAG of no-op stages (100 chains of
// 10, then a fan-in) with 4 workers, and the ratio to 1,000 bare asynq
// tasks on 4 servers.

const pollInterval = 10 * time.Millisecond

type benchEnv struct {
	addr string
	ns   string
	st   *fsstore.Store
}

func newBenchEnv(b *testing.B) *benchEnv {
	addr := testenv.Redis(b)
	st, err := fsstore.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	return &benchEnv{addr: addr, ns: randomName("nfbench-"), st: st}
}

// workers starts n workers, each with its own Redis client, concurrency 1.
func (e *benchEnv) workers(b *testing.B, n int) *engine.Engine {
	var sub *engine.Engine
	for i := 0; i <= n; i++ {
		rdb := redis.NewClient(&redis.Options{Addr: e.addr})
		eng := engine.New(rdb, e.st, engine.WithNamespace(e.ns), engine.WithLogger(quiet))
		b.Cleanup(func() { eng.Close(); rdb.Close() })
		if i == n {
			sub = eng
			break
		}
		w := eng.NewWorker(engine.WorkerOptions{Concurrency: 1, PollInterval: pollInterval, Name: "bench-" + strconv.Itoa(i)})
		if err := w.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(w.Shutdown)
	}
	return sub
}

func chainSpec(n, salt int) string {
	var sb strings.Builder
	sb.WriteString("nodes:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&sb, "  n%d: {stage: test.noop, params: {i: %d}", i, salt*100000+i)
		if i > 0 {
			fmt.Fprintf(&sb, ", inputs: {in: n%d}", i-1)
		}
		sb.WriteString("}\n")
	}
	return sb.String()
}

func BenchmarkTransition(b *testing.B) {
	const chain = 40
	env := newBenchEnv(b)
	eng := env.workers(b, 1)
	bare := bareAsynq(b, env.addr, 1)
	var engineTotal, bareTotal time.Duration
	var gaps []time.Duration
	for i := 0; i < b.N; i++ {
		g := graphB(b, chainSpec(chain, i+1)) // new params: no cache hits
		st := runB(b, eng, g)
		for j := 1; j < chain; j++ {
			prev, _ := st.Node("n" + strconv.Itoa(j-1))
			next, _ := st.Node("n" + strconv.Itoa(j))
			gap := next.StartedAt.Sub(*prev.FinishedAt)
			gaps = append(gaps, gap)
			engineTotal += gap
		}
		bareTotal += bare.chain(b, chain)
	}
	transitions := float64(b.N * (chain - 1))
	perEngine := float64(engineTotal.Microseconds()) / 1000 / transitions
	perBare := float64(bareTotal.Microseconds()) / 1000 / transitions
	sort.Slice(gaps, func(i, j int) bool { return gaps[i] < gaps[j] })
	b.ReportMetric(perEngine, "ms/transition")
	b.ReportMetric(float64(gaps[len(gaps)*95/100].Microseconds())/1000, "p95-ms/transition")
	b.ReportMetric(perBare, "asynq-ms/hop")
	b.ReportMetric(perEngine/perBare, "x-asynq")
}

func BenchmarkDAG1000(b *testing.B) {
	env := newBenchEnv(b)
	eng := env.workers(b, 4)
	bare := bareAsynq(b, env.addr, 4)
	var engineTotal, bareTotal time.Duration
	for i := 0; i < b.N; i++ {
		// 100 chains of 10 nodes (layer k of chain c reads layer k-1 of
		// chain c), the last layer fanned in: 1,000 nodes.
		var sb strings.Builder
		sb.WriteString("nodes:\n")
		vals := make([]string, 100)
		for c := range vals {
			vals[c] = strconv.Itoa(i*1000 + c)
		}
		for k := 0; k < 9; k++ {
			fmt.Fprintf(&sb, "  l%d: {stage: test.noop, fan_out: {i: [%s]}", k, strings.Join(vals, ", "))
			if k > 0 {
				fmt.Fprintf(&sb, ", inputs: {in: l%d}", k-1)
			}
			sb.WriteString("}\n")
		}
		fmt.Fprintf(&sb, "  sink: {stage: test.noop, params: {i: %d}, inputs: {in: l8}}\n", i)
		// 900 fanned-out nodes and the sink, topped up to 1,000 with 99
		// independent nodes.
		g2 := graphB(b, sb.String()+extraNodes(99, i))
		if len(g2.Nodes) != 1000 {
			b.Fatalf("%d nodes", len(g2.Nodes))
		}
		start := time.Now()
		st := runB(b, eng, g2)
		engineTotal += time.Since(start)
		if c := st.Counts()[engine.Done]; c != 1000 {
			b.Fatalf("%d nodes done", c)
		}
		bareTotal += bare.batch(b, 1000)
	}
	b.ReportMetric(engineTotal.Seconds()/float64(b.N), "s/1000-nodes")
	b.ReportMetric(bareTotal.Seconds()/float64(b.N), "asynq-s/1000-tasks")
	b.ReportMetric(engineTotal.Seconds()/bareTotal.Seconds(), "x-asynq")
}

func extraNodes(n, salt int) string {
	var sb strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&sb, "  x%d: {stage: test.noop, params: {i: %d}}\n", i, 1_000_000+salt*1000+i)
	}
	return sb.String()
}

func graphB(b *testing.B, text string) *spec.Graph {
	b.Helper()
	s, err := spec.Parse([]byte(text), "bench.yaml", b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	g, err := s.Expand()
	if err != nil {
		b.Fatal(err)
	}
	return g
}

func runB(b *testing.B, e *engine.Engine, g *spec.Graph) *engine.RunStatus {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	id, err := e.Submit(ctx, g, engine.SubmitOptions{})
	if err != nil {
		b.Fatal(err)
	}
	st, err := e.Wait(ctx, id, 10*time.Millisecond, nil)
	if err != nil {
		b.Fatal(err)
	}
	if st.State != engine.Succeeded {
		b.Fatalf("run %s: %s", st.State, st.Error)
	}
	return st
}

// bareTasks is the reference: asynq servers with the engine's settings and a
// handler that does nothing but record times (and, for a chain, enqueue
// the next task).
type bareTasks struct {
	client *asynq.Client
	queue  string
	mu     sync.Mutex
	start  map[int]time.Time
	end    map[int]time.Time
	done   chan int
}

func bareAsynq(b *testing.B, addr string, servers int) *bareTasks {
	bt := &bareTasks{queue: randomName("nfbare-"), done: make(chan int, 2000)}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	bt.client = asynq.NewClientFromRedisClient(rdb)
	b.Cleanup(func() { bt.client.Close(); rdb.Close() })
	for i := 0; i < servers; i++ {
		srdb := redis.NewClient(&redis.Options{Addr: addr})
		srv := asynq.NewServerFromRedisClient(srdb, asynq.Config{Concurrency: 1, Queues: map[string]int{bt.queue: 1},
			TaskCheckInterval: pollInterval, LogLevel: asynq.ErrorLevel})
		mux := asynq.NewServeMux()
		mux.HandleFunc("hop", bt.handle)
		if err := srv.Start(mux); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { srv.Shutdown(); srdb.Close() })
	}
	return bt
}

func (bt *bareTasks) handle(ctx context.Context, t *asynq.Task) error {
	p := strings.SplitN(string(t.Payload()), "/", 2)
	i, _ := strconv.Atoi(p[0])
	last, _ := strconv.Atoi(p[1])
	bt.mu.Lock()
	bt.start[i] = time.Now()
	bt.mu.Unlock()
	if i < last {
		if err := bt.enqueue(ctx, i+1, last); err != nil {
			return err
		}
	}
	bt.mu.Lock()
	bt.end[i] = time.Now()
	bt.mu.Unlock()
	bt.done <- i
	return nil
}

func (bt *bareTasks) enqueue(ctx context.Context, i, last int) error {
	_, err := bt.client.EnqueueContext(ctx, asynq.NewTask("hop", []byte(fmt.Sprintf("%d/%d", i, last))), asynq.Queue(bt.queue))
	return err
}

func (bt *bareTasks) reset() {
	bt.mu.Lock()
	bt.start, bt.end = map[int]time.Time{}, map[int]time.Time{}
	bt.mu.Unlock()
}

// chain runs n tasks each enqueued by the previous one and returns the sum
// of the gaps between a task's end and its successor's start.
func (bt *bareTasks) chain(b *testing.B, n int) time.Duration {
	bt.reset()
	if err := bt.enqueue(context.Background(), 0, n-1); err != nil {
		b.Fatal(err)
	}
	bt.wait(b, n)
	var total time.Duration
	for i := 1; i < n; i++ {
		total += bt.start[i].Sub(bt.end[i-1])
	}
	return total
}

// batch runs n independent tasks and returns the wall time.
func (bt *bareTasks) batch(b *testing.B, n int) time.Duration {
	bt.reset()
	start := time.Now()
	for i := 0; i < n; i++ {
		if err := bt.enqueue(context.Background(), i, i); err != nil {
			b.Fatal(err)
		}
	}
	bt.wait(b, n)
	return time.Since(start)
}

func (bt *bareTasks) wait(b *testing.B, n int) {
	timeout := time.After(5 * time.Minute)
	for k := 0; k < n; k++ {
		select {
		case <-bt.done:
		case <-timeout:
			b.Fatalf("bare asynq: %d of %d tasks done", k, n)
		}
	}
}
