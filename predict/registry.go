package predict

import (
	"context"
	"strconv"

	"github.com/nerflow/nerflow/registry"
	"github.com/nerflow/nerflow/stages"
)

// TaggedSource serves the version of model name that tag points at in the
// registry (registering the models of newly finished runs first), so that
// promoting another version moves what serves at the watcher's next check.
func TaggedSource(reg *registry.Registry, name, tag string) Source {
	return SourceFunc(func(ctx context.Context) (stages.Artifact, Info, error) {
		if _, err := reg.Sync(ctx); err != nil {
			return stages.Artifact{}, Info{}, err
		}
		v, err := reg.Tagged(ctx, name, tag)
		if err != nil {
			return stages.Artifact{}, Info{}, err
		}
		return v.Model, Info{Name: name, Version: strconv.Itoa(v.Version)}, nil
	})
}
