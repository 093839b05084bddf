// Package stagestest helps tests of stages put their inputs in a store.
package stagestest

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/storage"
)

// ImportFiles writes files (name to content) to a new directory and
// imports it into st as an artifact, as a user's `nerflow import` would.
func ImportFiles(t testing.TB, st storage.Store, files map[string][]byte) stages.Artifact {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a, err := stages.Import(context.Background(), st, "datasets", dir, "")
	if err != nil {
		t.Fatal(err)
	}
	return a
}
