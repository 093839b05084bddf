package cli

import (
	"errors"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nerflow/nerflow/internal/allocator"
	"github.com/nerflow/nerflow/kit"
	"github.com/nerflow/nerflow/pipeline/engine"
	"github.com/nerflow/nerflow/workers"
)

func init() {
	register(func(a *app) *cobra.Command {
		var (
			queues      string
			concurrency int
			device      string
			grace       time.Duration
			poll        time.Duration
			tempDir     string
			gpuOnCPU    bool
			lease       time.Duration
			reconcile   time.Duration
			patience    time.Duration
			threads     int
		)
		cmd := &cobra.Command{
			Use:   "worker",
			Short: "Execute pipeline nodes from the cluster's queues",
			Long: `Worker takes nodes from the given queues (cpu, gpu) of the Redis server and
executes their stages, reading and writing artifacts in the configured store.
Start as many workers as you have machines or GPUs; a worker that dies has its
node re-run by another one (from the stage's last checkpoint when the stage
supports it): status shows it as "worker lost, waiting to be re-run", and
the re-run starts within about 35 s with the default settings. Workers also
restore the state of runs that Redis lost from the store, and wait out an
unreachable store or Redis for --outage-patience without spending attempts.

A GPU device runs one node at a time (its own server of concurrency 1, gpu
queue first, then cpu nodes when listed); --concurrency is for the cpu queue,
served on the CPU. The gpu queue is not served without a GPU device unless
--gpu-on-cpu says so. Workers advertise themselves in Redis (nerflow workers).

On SIGTERM or Ctrl-C the worker stops taking nodes, lets running ones finish
for --shutdown-timeout, and hands those still running back to their queue.`,
			Example: `  nerflow worker --redis 10.0.0.5:6379 --store s3://nerflow?endpoint=10.0.0.6:9000 --queues cpu --concurrency 8
  nerflow worker --queues gpu,cpu --concurrency 4 --device cuda:0,cuda:1`,
			Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				var devices []string
				for _, d := range strings.Split(device, ",") {
					d = strings.TrimSpace(d)
					if err := checkDevice(d); err != nil {
						return err
					}
					devices = append(devices, d)
				}
				var qs []string
				for _, q := range strings.Split(queues, ",") {
					q = strings.TrimSpace(q)
					if q != "cpu" && q != "gpu" {
						return errors.New("--queues: want a comma-separated list of cpu and gpu")
					}
					qs = append(qs, q)
				}
				kit.SetThreads(threads)
				cfg := workers.Config{
					Queues: qs, Devices: devices, Concurrency: concurrency, GPUOnCPU: gpuOnCPU,
					Worker: engine.WorkerOptions{ShutdownTimeout: grace, PollInterval: poll, TempDir: tempDir,
						NodeLease: lease, ReconcileInterval: reconcile, OutagePatience: patience, Idle: a.releaseMemory},
				}
				if _, err := workers.Plan(cfg); err != nil {
					return err // before connecting: a configuration error
				}
				ctx := cmd.Context()
				e, closeAll, err := a.clusterEngine(ctx, true)
				if err != nil {
					return err
				}
				defer closeAll()
				rdb, err := a.redisClient(ctx)
				if err != nil {
					return err
				}
				defer rdb.Close()
				pool, err := workers.Start(e, rdb, a.cfg.Redis.Namespace, cfg, a.log)
				if err != nil {
					return err
				}
				<-ctx.Done()
				a.log.Info("worker shutting down", "grace", grace)
				pool.Shutdown()
				return nil
			},
		}
		cmd.Flags().StringVar(&queues, "queues", "cpu", "queues to serve, highest priority first: cpu, gpu or gpu,cpu")
		cmd.Flags().IntVar(&concurrency, "concurrency", 1, "cpu-queue nodes executed at once")
		cmd.Flags().StringVar(&device, "device", "cpu", "devices: cpu, or GPUs cuda:N[,cuda:M...] (one node at a time per GPU)")
		threadsFlag(cmd.Flags(), &threads)
		cmd.Flags().BoolVar(&gpuOnCPU, "gpu-on-cpu", false, "without a GPU device, serve the gpu queue on the CPU anyway")
		cmd.Flags().DurationVar(&grace, "shutdown-timeout", 25*time.Second, "on SIGTERM, how long running nodes may finish before they are handed back")
		cmd.Flags().DurationVar(&poll, "poll-interval", 10*time.Millisecond, "how often an idle worker checks its queues")
		cmd.Flags().StringVar(&tempDir, "temp-dir", os.TempDir(), "parent directory of stages' scratch directories")
		cmd.Flags().DurationVar(&lease, "node-lease", 15*time.Second, "how long a dead worker's claim on a node outlives it (renewed every third of it while alive)")
		cmd.Flags().DurationVar(&reconcile, "reconcile-interval", 5*time.Second, "how often runs Redis lost are restored from the store and nodes of dead workers re-run")
		cmd.Flags().DurationVar(&patience, "outage-patience", 10*time.Minute, "how long a node waits out an unreachable store or Redis before the attempt counts as failed")
		return cmd
	})
}

// releaseMemory hands the memory of the worker's last node back to the
// system once it has no node to run (engine.WorkerOptions.Idle): without
// it, an idle worker kept the peak of its last training resident.
func (a *app) releaseMemory() {
	before := allocator.Resident()
	how, err := allocator.Release()
	if err != nil {
		a.log.Warn("returning memory after the last node", "err", err)
		return
	}
	a.log.Info("worker idle: memory returned", "allocator", how,
		"resident_before_mib", before>>20, "resident_after_mib", allocator.Resident()>>20)
}
