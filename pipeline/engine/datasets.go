package engine

import (
	"context"
	"fmt"

	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/storage/artifact"
	"github.com/nerflow/nerflow/storage/layout"
)

// ImportDatasets makes the external datasets of g artifacts of the
// engine's store (see artifact.ImportSource: local paths are read by this
// process, store URLs copied from their store, a dataset already there is
// only hashed), under layout.Datasets, and returns them by dataset name.
// Submit calls it; so does the scheduler, which compares them with an
// earlier run's manifest to tell whether the same graph would read the
// same inputs.
func (e *Engine) ImportDatasets(ctx context.Context, g *spec.Graph) (map[string]stages.Artifact, error) {
	out := map[string]stages.Artifact{}
	for _, ds := range g.Datasets() {
		a, err := artifact.ImportSource(ctx, e.store, layout.Datasets, ds, "")
		if err != nil {
			return nil, fmt.Errorf("dataset: %w", err)
		}
		out[ds] = a
	}
	return out, nil
}
