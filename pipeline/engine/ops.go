package engine

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/stages"
)

// Exported helpers for the operating tools (scheduler, metrics).

// ImportDatasets imports the external datasets of g into the store, as
// Submit does (a dataset already there is only hashed), and returns their
// artifacts by dataset name. With the run manifest of an earlier run it
// tells whether the same graph would read the same inputs, which is what
// the scheduler's up-to-date check needs.
func (e *Engine) ImportDatasets(ctx context.Context, g *spec.Graph) (map[string]stages.Artifact, error) {
	return e.importDatasets(ctx, g)
}

// RunIDsSince returns the ids of the runs Redis knows that were created at
// or after since, oldest first, without reading the store (Runs also lists
// the manifests of runs Redis has forgotten). It is what a metrics exporter
// polls.
func (e *Engine) RunIDsSince(ctx context.Context, since time.Time) ([]string, error) {
	ids, err := e.rdb.ZRangeByScore(ctx, runsIndex(e.ns), &redis.ZRangeBy{
		Min: strconv.FormatInt(since.UnixMilli(), 10), Max: "+inf"}).Result()
	if err != nil {
		return nil, fmt.Errorf("listing runs: %w", err)
	}
	return ids, nil
}
