package predict

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/storage"
)

// Source says which checkpoint should serve now: a fixed one (a run's
// output) or whatever version a registry tag points at.
type Source interface {
	Current(ctx context.Context) (stages.Artifact, Info, error)
}

// SourceFunc adapts a function to Source.
type SourceFunc func(ctx context.Context) (stages.Artifact, Info, error)

// Current calls f.
func (f SourceFunc) Current(ctx context.Context) (stages.Artifact, Info, error) { return f(ctx) }

// Watcher keeps a batcher serving the checkpoint its source names: it
// loads it, then polls the source and swaps in the new model when the
// checkpoint's digest changes (a registry tag moved to another version).
type Watcher struct {
	b      *Batcher
	st     storage.Store
	src    Source
	device gotch.Device
	log    *slog.Logger

	mu      sync.Mutex
	serving string // digest of the model in service
	lastErr error
}

// NewWatcher returns a watcher of src for b.
func NewWatcher(b *Batcher, st storage.Store, src Source, device gotch.Device, log *slog.Logger) *Watcher {
	if log == nil {
		log = slog.Default()
	}
	return &Watcher{b: b, st: st, src: src, device: device, log: log}
}

// Check loads the source's current checkpoint if it is not the one
// serving. It reports whether it swapped.
func (w *Watcher) Check(ctx context.Context) (bool, error) {
	art, info, err := w.src.Current(ctx)
	if err != nil {
		w.setErr(err)
		return false, err
	}
	w.mu.Lock()
	same := art.Digest == w.serving
	w.mu.Unlock()
	if same {
		w.setErr(nil)
		return false, nil
	}
	started := time.Now()
	m, err := LoadArtifact(ctx, w.st, art, w.device, info)
	if err != nil {
		w.setErr(err)
		return false, err
	}
	w.b.Swap(m)
	w.mu.Lock()
	previous := w.serving
	w.serving, w.lastErr = art.Digest, nil
	w.mu.Unlock()
	w.log.Info("model loaded", "name", info.Name, "version", info.Version, "digest", shortDigest(art.Digest),
		"replaces", shortDigest(previous), "took", time.Since(started).Round(time.Millisecond))
	return true, nil
}

// Run checks every interval until ctx ends. Failures are logged and
// retried at the next tick; the model in service keeps serving.
func (w *Watcher) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	reported := ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_, err := w.Check(ctx)
		switch {
		case err == nil || ctx.Err() != nil:
			reported = ""
		case err.Error() != reported:
			// Once per distinct problem: a tag that points nowhere yet
			// would otherwise warn every interval.
			w.log.Warn("model not reloaded", "err", err)
			reported = err.Error()
		default:
			w.log.Debug("model not reloaded", "err", err)
		}
	}
}

// Err is the last check's error (nil after a good one).
func (w *Watcher) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastErr
}

func (w *Watcher) setErr(err error) {
	w.mu.Lock()
	w.lastErr = err
	w.mu.Unlock()
}

func shortDigest(d string) string {
	const prefix = "sha256:"
	if len(d) > len(prefix)+12 && d[:len(prefix)] == prefix {
		return d[len(prefix) : len(prefix)+12]
	}
	return d
}
