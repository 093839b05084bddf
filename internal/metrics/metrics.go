// Package metrics exports a nerflow cluster's state as Prometheus metrics,
// from Redis: one exporter (the API server's /metrics) describes every
// worker, queue and run, whichever process did the work.
//
// Gauges are read at each scrape: queue depths and latency (asynq's queue
// statistics), live workers and their utilization (package workers),
// running runs, and the throughput of running trainings (a stage's progress
// note ending in "N tokens/s", as train.tagger's does).
//
// Counters and histograms count what happened since the exporter started:
// at each scrape it reads the runs created in the last week that it has not
// seen finish, and observes each node and run that finished since the
// previous scrape (node durations per stage, node outcomes, cache hits, run
// outcomes). Whatever finished before the first scrape is the baseline and
// is not counted, as is usual for counters of a process that restarts.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/nerflow/nerflow/pipeline/engine"
	"github.com/nerflow/nerflow/workers"
)

// Lookback bounds how old a run may be and still be followed.
const Lookback = 7 * 24 * time.Hour

// Collector is a prometheus.Collector of a cluster's metrics.
type Collector struct {
	e       *engine.Engine
	rdb     redis.UniversalClient
	ns      string
	insp    *asynq.Inspector
	log     *slog.Logger
	timeout time.Duration

	nodeDuration *prometheus.HistogramVec
	nodes        *prometheus.CounterVec
	cacheHits    *prometheus.CounterVec
	runs         *prometheus.CounterVec

	queueSize      *prometheus.Desc
	queueLatency   *prometheus.Desc
	queueProcessed *prometheus.Desc
	queueFailed    *prometheus.Desc
	workersLive    *prometheus.Desc
	workerSlots    *prometheus.Desc
	workerBusy     *prometheus.Desc
	workerUtil     *prometheus.Desc
	runsRunning    *prometheus.Desc
	tokensPerSec   *prometheus.Desc
	up             *prometheus.Desc

	mu       sync.Mutex
	baseline bool
	finished map[string]bool            // runs seen finished
	observed map[string]map[string]bool // run -> nodes observed finished
}

// NewCollector returns the collector of the cluster of engine e, whose
// Redis client is rdb and namespace ns.
func NewCollector(e *engine.Engine, rdb redis.UniversalClient, ns string, log *slog.Logger) *Collector {
	if log == nil {
		log = slog.Default()
	}
	c := &Collector{
		e: e, rdb: rdb, ns: ns, insp: asynq.NewInspectorFromRedisClient(rdb), log: log, timeout: 10 * time.Second,
		finished: map[string]bool{}, observed: map[string]map[string]bool{},
		nodeDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "nerflow_node_duration_seconds", Help: "Duration of executed nodes (not cached ones), by stage and queue.",
			// 50 ms to ~4 days.
			Buckets: prometheus.ExponentialBuckets(0.05, 4, 12),
		}, []string{"stage", "queue"}),
		nodes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nerflow_nodes_finished_total", Help: "Nodes finished, by stage and final state (done, cached, failed, cancelled).",
		}, []string{"stage", "state"}),
		cacheHits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nerflow_cache_hits_total", Help: "Nodes served from the content-addressed cache instead of executed, by stage.",
		}, []string{"stage"}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nerflow_runs_finished_total", Help: "Runs finished, by outcome (succeeded, failed, cancelled).",
		}, []string{"state"}),
		queueSize: prometheus.NewDesc(QueueTasks, "Tasks in a queue, by state (pending, active, scheduled, retry, archived, completed).",
			[]string{"queue", "state"}, nil),
		queueLatency: prometheus.NewDesc("nerflow_queue_latency_seconds", "Age of the oldest pending task of a queue.",
			[]string{"queue"}, nil),
		queueProcessed: prometheus.NewDesc("nerflow_queue_processed_total", "Tasks processed by a queue's workers (asynq's counter).",
			[]string{"queue"}, nil),
		queueFailed: prometheus.NewDesc("nerflow_queue_failed_total", "Task attempts that failed (asynq's counter).",
			[]string{"queue"}, nil),
		workersLive: prometheus.NewDesc("nerflow_workers", "Live workers (asynq heartbeat), by device kind (cpu, gpu).",
			[]string{"device_kind"}, nil),
		workerSlots: prometheus.NewDesc("nerflow_worker_slots", "Nodes a worker may run at once.",
			[]string{"worker", "device"}, nil),
		workerBusy: prometheus.NewDesc("nerflow_worker_busy_slots", "Nodes a worker runs (as of its last heartbeat).",
			[]string{"worker", "device"}, nil),
		workerUtil: prometheus.NewDesc("nerflow_worker_utilization", "Fraction of a worker's slots that run a node.",
			[]string{"worker", "device"}, nil),
		runsRunning: prometheus.NewDesc("nerflow_runs_running", "Runs in progress.", nil, nil),
		tokensPerSec: prometheus.NewDesc("nerflow_training_tokens_per_second", "Throughput of running trainings, from their progress.",
			[]string{"run", "node", "stage", "worker"}, nil),
		up: prometheus.NewDesc("nerflow_up", "1 when the exporter could read the cluster's state at this scrape.", nil, nil),
	}
	return c
}

// NewRegistry returns a registry with the cluster's collector and the Go
// runtime and process collectors of this process.
func NewRegistry(c *Collector) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(c, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Handler serves reg in the Prometheus exposition format (mount it at
// /metrics).
func Handler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	c.nodeDuration.Describe(ch)
	c.nodes.Describe(ch)
	c.cacheHits.Describe(ch)
	c.runs.Describe(ch)
	for _, d := range []*prometheus.Desc{c.queueSize, c.queueLatency, c.queueProcessed, c.queueFailed, c.workersLive,
		c.workerSlots, c.workerBusy, c.workerUtil, c.runsRunning, c.tokensPerSec, c.up} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	up := 1.0
	if err := c.collectRuns(ctx, ch); err != nil {
		c.log.Warn("metrics: reading runs", "err", err)
		up = 0
	}
	if err := c.collectQueues(ch); err != nil {
		c.log.Warn("metrics: reading queues", "err", err)
		up = 0
	}
	if err := c.collectWorkers(ctx, ch); err != nil {
		c.log.Warn("metrics: reading workers", "err", err)
		up = 0
	}
	c.nodeDuration.Collect(ch)
	c.nodes.Collect(ch)
	c.cacheHits.Collect(ch)
	c.runs.Collect(ch)
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up)
}

func (c *Collector) collectQueues(ch chan<- prometheus.Metric) error {
	for _, q := range []string{"cpu", "gpu"} {
		info, err := c.insp.GetQueueInfo(c.ns + ":" + q)
		if err != nil {
			// A queue nobody has used yet does not exist in asynq.
			for _, s := range []string{"pending", "active", "scheduled", "retry", "archived", "completed"} {
				ch <- prometheus.MustNewConstMetric(c.queueSize, prometheus.GaugeValue, 0, q, s)
			}
			ch <- prometheus.MustNewConstMetric(c.queueLatency, prometheus.GaugeValue, 0, q)
			continue
		}
		for s, n := range map[string]int{"pending": info.Pending, "active": info.Active, "scheduled": info.Scheduled,
			"retry": info.Retry, "archived": info.Archived, "completed": info.Completed} {
			ch <- prometheus.MustNewConstMetric(c.queueSize, prometheus.GaugeValue, float64(n), q, s)
		}
		ch <- prometheus.MustNewConstMetric(c.queueLatency, prometheus.GaugeValue, info.Latency.Seconds(), q)
		ch <- prometheus.MustNewConstMetric(c.queueProcessed, prometheus.CounterValue, float64(info.ProcessedTotal), q)
		ch <- prometheus.MustNewConstMetric(c.queueFailed, prometheus.CounterValue, float64(info.FailedTotal), q)
	}
	return nil
}

func (c *Collector) collectWorkers(ctx context.Context, ch chan<- prometheus.Metric) error {
	ws, err := workers.List(ctx, c.rdb, c.ns)
	if err != nil {
		return err
	}
	kinds := map[string]int{"cpu": 0, "gpu": 0}
	for _, w := range ws {
		kind := "cpu"
		if w.Device != "" && w.Device != "cpu" {
			kind = "gpu"
		}
		kinds[kind]++
		ch <- prometheus.MustNewConstMetric(c.workerSlots, prometheus.GaugeValue, float64(w.Concurrency), w.Name, w.Device)
		ch <- prometheus.MustNewConstMetric(c.workerBusy, prometheus.GaugeValue, float64(len(w.Active)), w.Name, w.Device)
		ch <- prometheus.MustNewConstMetric(c.workerUtil, prometheus.GaugeValue, w.Utilization(), w.Name, w.Device)
	}
	for k, n := range kinds {
		ch <- prometheus.MustNewConstMetric(c.workersLive, prometheus.GaugeValue, float64(n), k)
	}
	return nil
}

var tokensRE = regexp.MustCompile(`([0-9]+(?:\.[0-9]+)?) tokens/s\s*$`)

// collectRuns observes what finished since the last scrape and reports the
// running runs and trainings.
func (c *Collector) collectRuns(ctx context.Context, ch chan<- prometheus.Metric) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids, err := c.e.RunIDsSince(ctx, time.Now().Add(-Lookback))
	if err != nil {
		return err
	}
	running := 0
	for _, id := range ids {
		if c.finished[id] {
			continue
		}
		st, err := c.e.Status(ctx, id)
		if err != nil {
			c.log.Debug("metrics: run status", "run", id, "err", err)
			continue
		}
		seen := c.observed[id]
		if seen == nil {
			seen = map[string]bool{}
			c.observed[id] = seen
		}
		for _, n := range st.Nodes {
			if n.State == engine.Running && n.Progress != nil {
				if m := tokensRE.FindStringSubmatch(n.Progress.Note); m != nil {
					v, _ := strconv.ParseFloat(m[1], 64)
					ch <- prometheus.MustNewConstMetric(c.tokensPerSec, prometheus.GaugeValue, v, id, n.ID, n.Stage, n.Worker)
				}
			}
			if !engine.Finished(n.State) || seen[n.ID] {
				continue
			}
			seen[n.ID] = true
			if c.baseline {
				c.observeNode(n)
			}
		}
		if st.State == engine.Running {
			running++
			continue
		}
		if c.baseline {
			c.runs.WithLabelValues(st.State).Inc()
		}
		c.finished[id] = true
		delete(c.observed, id)
	}
	// Forget runs that left the lookback window.
	if len(c.finished) > 2*len(ids)+1000 {
		keep := map[string]bool{}
		for _, id := range ids {
			if c.finished[id] {
				keep[id] = true
			}
		}
		c.finished = keep
	}
	c.baseline = true
	ch <- prometheus.MustNewConstMetric(c.runsRunning, prometheus.GaugeValue, float64(running))
	return nil
}

func (c *Collector) observeNode(n engine.NodeStatus) {
	c.nodes.WithLabelValues(n.Stage, n.State).Inc()
	switch n.State {
	case engine.Cached:
		c.cacheHits.WithLabelValues(n.Stage).Inc()
	case engine.Done:
		if d := n.Duration(); d > 0 {
			c.nodeDuration.WithLabelValues(n.Stage, n.Queue).Observe(d.Seconds())
		}
	}
}

// Runs is the counter of finished runs by state (for tests and for
// processes that want to add their own observations).
func (c *Collector) Runs() *prometheus.CounterVec { return c.runs }

// QueueTasks is the name of the queue-depth gauge, which autoscalers of the
// worker pools read (deploy/k8s/autoscaling.yaml).
const QueueTasks = "nerflow_queue_tasks"
