package predict

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/storage/artifact"
	"github.com/nerflow/nerflow/storage/fsstore"
	"github.com/nerflow/nerflow/train/tagger"
)

// A new version whose weights rotted in the store fails to load, and is
// never swapped in: the version in service keeps answering, and the
// watcher says what failed.
func TestWatcherKeepsServingWhenANewVersionIsDamaged(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	st, err := fsstore.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tg := tinyModel(t, 1)
	if err := tg.Save(dir); err != nil {
		t.Fatal(err)
	}
	tg.Close()
	good, err := artifact.Import(ctx, st, "models/one", dir, "checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	// Another version: other content, so that the watcher loads it.
	if err := os.WriteFile(filepath.Join(dir, "note.txt"), []byte("version 2"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad, err := artifact.Import(ctx, st, "models/two", dir, "checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	weights := filepath.Join(root, filepath.FromSlash(bad.Key(tagger.WeightsFile)))
	b, err := os.ReadFile(weights)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x01
	if err := os.WriteFile(weights, b, 0o644); err != nil {
		t.Fatal(err)
	}

	var (
		mu      sync.Mutex
		current stages.Artifact
		version string
	)
	serve := func(a stages.Artifact, v string) { mu.Lock(); current, version = a, v; mu.Unlock() }
	src := SourceFunc(func(context.Context) (stages.Artifact, Info, error) {
		mu.Lock()
		defer mu.Unlock()
		return current, Info{Name: "tiny", Version: version}, nil
	})
	bt := NewBatcher(nil, Options{})
	defer bt.Close()
	w := NewWatcher(bt, st, src, gotch.CPU, slog.New(slog.DiscardHandler))
	serve(good, "1")
	if swapped, err := w.Check(ctx); !swapped || err != nil {
		t.Fatalf("loading version 1: swapped %v, %v", swapped, err)
	}
	serve(bad, "2")
	swapped, err := w.Check(ctx)
	if swapped || err == nil || !strings.Contains(err.Error(), bad.Prefix) || w.Err() == nil {
		t.Fatalf("loading a damaged version 2: swapped %v, %v (want an error naming %s)", swapped, err, bad.Prefix)
	}
	t.Logf("the damaged version: %v", err)
	r, err := bt.Predict(ctx, Request{Texts: []string{"John Smith lives in Paris."}})
	if err != nil || r.Model.Version != "1" || r.Model.Digest != good.Digest {
		t.Fatalf("after a failed load: %+v, %v; want version 1 answering", r, err)
	}
}
