package engine

import (
	"context"

	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/stages"
)

// ImportDatasets imports the external datasets of g into the store, as
// Submit does (a dataset already there is only hashed), and returns their
// artifacts by dataset name. With the run manifest of an earlier run it
// tells whether the same graph would read the same inputs, which is what
// the scheduler's up-to-date check needs.
func (e *Engine) ImportDatasets(ctx context.Context, g *spec.Graph) (map[string]stages.Artifact, error) {
	out := map[string]stages.Artifact{}
	for _, ds := range g.Datasets() {
		a, err := importDataset(ctx, e.store, ds)
		if err != nil {
			return nil, err
		}
		out[ds] = a
	}
	return out, nil
}
