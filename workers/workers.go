// Package workers is nerflow's worker pool: how a `nerflow worker` process
// splits into asynq servers per device, and how the workers of a cluster
// advertise themselves and are listed.
//
// Liveness is asynq's own: every server writes a heartbeat (host, pid,
// queues, concurrency, the tasks it is running) that expires when the
// process dies. nerflow adds what asynq does not know in a small Redis key
// per worker, refreshed by the worker and expiring with it: its name,
// device, nerflow version and queues by their spec names. List joins the
// two.
//
// The rules of the pool (Plan):
//   - a GPU device runs one node at a time: each cuda:N device gets its own
//     server of concurrency 1, serving the gpu queue first;
//   - the gpu queue is never served on the CPU unless the pool is told so
//     (Config.GPUOnCPU), so that a training meant for a GPU does not crawl
//     on a CPU-only machine;
//   - the cpu queue is served by one server of Config.Concurrency on device
//     cpu.
//
// Scaling out is starting another worker process anywhere that reaches
// Redis and the store: workers share nothing else.
package workers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/nerflow/nerflow/internal/version"
	"github.com/nerflow/nerflow/pipeline/engine"
)

// Config describes the workers of one process.
type Config struct {
	// Queues to serve, by spec name: "cpu", "gpu" (default cpu).
	Queues []string
	// Devices: "cpu" or any number of "cuda:N" (default cpu).
	Devices []string
	// Concurrency is the number of cpu-queue nodes run at once (default 1).
	// GPU devices always run one node at a time.
	Concurrency int
	// GPUOnCPU lets a pool without a GPU serve the gpu queue on the CPU.
	GPUOnCPU bool
	// Name prefixes the workers' names (default host:pid): each worker is
	// NAME/QUEUES on the CPU and NAME/DEVICE/QUEUES on a GPU, QUEUES as
	// served, highest priority first ("host:42/gpu,cpu"), so that a name
	// says what the worker takes.
	Name string
	// Worker is the template of every worker's options (timeouts, poll
	// interval, temp dir); Queues, Concurrency, Device and Name are set by
	// Plan.
	Worker engine.WorkerOptions
}

// Plan turns a configuration into the options of the engine workers to
// start, or explains why it cannot be served.
func Plan(cfg Config) ([]engine.WorkerOptions, error) {
	if len(cfg.Queues) == 0 {
		cfg.Queues = []string{"cpu"}
	}
	if len(cfg.Devices) == 0 {
		cfg.Devices = []string{"cpu"}
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 1
	}
	if cfg.Name == "" {
		host, _ := os.Hostname()
		cfg.Name = host + ":" + strconv.Itoa(os.Getpid())
	}
	serves := map[string]bool{}
	for _, q := range cfg.Queues {
		if q != "cpu" && q != "gpu" {
			return nil, fmt.Errorf("queue %q: want cpu or gpu", q)
		}
		if serves[q] {
			return nil, fmt.Errorf("queue %s listed twice", q)
		}
		serves[q] = true
	}
	var gpus []string
	seen := map[string]bool{}
	for _, d := range cfg.Devices {
		switch {
		case seen[d]:
			return nil, fmt.Errorf("device %s listed twice", d)
		case d == "cpu":
			if len(cfg.Devices) > 1 {
				return nil, errors.New("devices: cpu cannot be listed with GPUs (the cpu queue is served on the CPU anyway)")
			}
		case strings.HasPrefix(d, "cuda:") && isIndex(d[len("cuda:"):]):
			gpus = append(gpus, d)
		default:
			return nil, fmt.Errorf("device %q: want cpu or cuda:N", d)
		}
		seen[d] = true
	}
	if serves["gpu"] && len(gpus) == 0 && !cfg.GPUOnCPU {
		return nil, errors.New("the gpu queue needs a GPU device (--device cuda:N); " +
			"to run its nodes on the CPU anyway, allow it explicitly (--gpu-on-cpu)")
	}
	worker := func(device string, queues []string, n int) engine.WorkerOptions {
		o := cfg.Worker
		o.Device, o.Queues, o.Concurrency = device, queues, n
		o.Name = cfg.Name + "/"
		if device != "cpu" {
			o.Name += device + "/"
		}
		o.Name += strings.Join(queues, ",")
		return o
	}
	var out []engine.WorkerOptions
	for _, d := range gpus {
		// One node at a time per device; a GPU idle for want of gpu nodes
		// helps with cpu ones.
		qs := []string{"gpu"}
		if serves["cpu"] {
			qs = append(qs, "cpu")
		}
		if !serves["gpu"] {
			qs = []string{"cpu"}
		}
		out = append(out, worker(d, qs, 1))
	}
	if len(gpus) == 0 {
		// Queue order as given (gpu first means gpu nodes have priority).
		var qs []string
		for _, q := range cfg.Queues {
			if q == "cpu" || cfg.GPUOnCPU {
				qs = append(qs, q)
			}
		}
		out = append(out, worker("cpu", qs, cfg.Concurrency))
	} else if serves["cpu"] {
		out = append(out, worker("cpu", []string{"cpu"}, cfg.Concurrency))
	}
	return out, nil
}

func isIndex(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n >= 0 && strconv.Itoa(n) == s
}

// Meta is what a worker advertises beside asynq's heartbeat.
type Meta struct {
	Name        string    `json:"name"`
	Host        string    `json:"host"`
	PID         int       `json:"pid"`
	Device      string    `json:"device"`
	Queues      []string  `json:"queues"`
	Concurrency int       `json:"concurrency"`
	Version     string    `json:"version"`
	Started     time.Time `json:"started"`
}

// Interval is how often a worker refreshes its advertisement; it expires
// after TTL without one.
const (
	Interval = 5 * time.Second
	TTL      = 3 * Interval
)

func metaKey(ns, name string) string { return ns + ":workers:" + name }

// Pool is the running workers of one process.
type Pool struct {
	rdb     redis.UniversalClient
	ns      string
	log     *slog.Logger
	workers []*engine.Worker
	metas   []Meta
	stop    chan struct{}
	done    sync.WaitGroup
}

// Start plans cfg and starts its workers on engine e, whose Redis client
// rdb and namespace ns they advertise in.
func Start(e *engine.Engine, rdb redis.UniversalClient, ns string, cfg Config, log *slog.Logger) (*Pool, error) {
	plan, err := Plan(cfg)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	host, _ := os.Hostname()
	p := &Pool{rdb: rdb, ns: ns, log: log, stop: make(chan struct{})}
	for _, o := range plan {
		w := e.NewWorker(o)
		started := time.Now().UTC()
		if err := w.Start(); err != nil {
			p.Shutdown()
			return nil, err
		}
		p.workers = append(p.workers, w)
		p.metas = append(p.metas, Meta{Name: o.Name, Host: host, PID: os.Getpid(), Device: o.Device, Queues: o.Queues,
			Concurrency: o.Concurrency, Version: version.String(), Started: started})
	}
	p.advertise()
	p.done.Add(1)
	go func() {
		defer p.done.Done()
		t := time.NewTicker(Interval)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.advertise()
			}
		}
	}()
	return p, nil
}

// Workers returns what each worker of the pool advertises.
func (p *Pool) Workers() []Meta { return slices.Clone(p.metas) }

func (p *Pool) advertise() {
	ctx, cancel := context.WithTimeout(context.Background(), Interval)
	defer cancel()
	_, err := p.rdb.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for _, m := range p.metas {
			b, _ := json.Marshal(m)
			pl.Set(ctx, metaKey(p.ns, m.Name), b, TTL)
		}
		return nil
	})
	if err != nil {
		p.log.Warn("advertising workers", "err", err)
	}
}

// Shutdown stops taking nodes, lets running ones finish for the workers'
// ShutdownTimeout and hands the rest back to their queues (all workers at
// once), then withdraws the advertisements.
func (p *Pool) Shutdown() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	p.done.Wait()
	var wg sync.WaitGroup
	for _, w := range p.workers {
		wg.Add(1)
		go func() { defer wg.Done(); w.Shutdown() }()
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, m := range p.metas {
		p.rdb.Del(ctx, metaKey(p.ns, m.Name))
	}
}

// Info is one live worker: asynq's heartbeat joined with its advertisement.
type Info struct {
	Meta
	// ServerID is asynq's id of the worker's server.
	ServerID string `json:"server_id"`
	// Status is asynq's server status ("active", "stopped" while draining).
	Status string `json:"status"`
	// Active are the nodes it runs (as of its last heartbeat, at most 5 s
	// old).
	Active []Node `json:"active"`
	// Advertised is false for a server that has no advertisement (a worker
	// of another nerflow version, or one whose advertisement lapsed).
	Advertised bool `json:"advertised"`
}

// Utilization is the fraction of the worker's slots that run a node.
func (i Info) Utilization() float64 {
	if i.Concurrency == 0 {
		return 0
	}
	return float64(len(i.Active)) / float64(i.Concurrency)
}

// Node is a node a worker runs.
type Node struct {
	Run     string    `json:"run"`
	Node    string    `json:"node"`
	Queue   string    `json:"queue"`
	Started time.Time `json:"started"`
}

// List returns the live workers of namespace ns, by name.
func List(ctx context.Context, rdb redis.UniversalClient, ns string) ([]Info, error) {
	insp := asynq.NewInspectorFromRedisClient(rdb)
	// The inspector shares rdb: there is nothing of its own to close.
	servers, err := insp.Servers()
	if err != nil {
		return nil, fmt.Errorf("listing asynq servers: %w", err)
	}
	var metas []Meta
	var cursor uint64
	for {
		keys, next, err := rdb.Scan(ctx, cursor, ns+":workers:*", 100).Result()
		if err != nil {
			return nil, fmt.Errorf("listing worker advertisements: %w", err)
		}
		for _, k := range keys {
			b, err := rdb.Get(ctx, k).Bytes()
			if err != nil {
				continue // expired meanwhile
			}
			var m Meta
			if json.Unmarshal(b, &m) == nil {
				metas = append(metas, m)
			}
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	prefix := ns + ":"
	claimed := make([]bool, len(metas))
	var out []Info
	for _, s := range servers {
		var queues []string
		for q := range s.Queues {
			if name, ok := strings.CutPrefix(q, prefix); ok {
				queues = append(queues, name)
			}
		}
		if len(queues) == 0 {
			continue // another namespace's server
		}
		info := Info{ServerID: s.ID, Status: s.Status}
		for _, w := range s.ActiveWorkers {
			run, node, _ := strings.Cut(w.TaskID, "/")
			info.Active = append(info.Active, Node{Run: run, Node: node, Queue: strings.TrimPrefix(w.Queue, prefix), Started: w.Started})
		}
		sort.Slice(info.Active, func(i, j int) bool { return info.Active[i].Started.Before(info.Active[j].Started) })
		// The advertisement of this server: same process, queues and
		// concurrency, started closest in time (a process may hold
		// several servers, one per device).
		best := -1
		for i, m := range metas {
			if claimed[i] || m.Host != s.Host || m.PID != s.PID || m.Concurrency != s.Concurrency || !sameSet(m.Queues, queues) {
				continue
			}
			if best < 0 || absDur(m.Started.Sub(s.Started)) < absDur(metas[best].Started.Sub(s.Started)) {
				best = i
			}
		}
		if best >= 0 {
			claimed[best] = true
			info.Meta, info.Advertised = metas[best], true
		} else {
			info.Meta = Meta{Name: s.Host + ":" + strconv.Itoa(s.PID), Host: s.Host, PID: s.PID, Queues: queues,
				Concurrency: s.Concurrency, Started: s.Started}
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
