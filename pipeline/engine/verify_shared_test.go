package engine_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/pipeline/engine"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/storage"
	"github.com/nerflow/nerflow/storage/artifact"
	"github.com/nerflow/nerflow/storage/fsstore"
	"github.com/nerflow/nerflow/storage/layout"
)

// sharedTable is the 1 MiB + 1 byte file test.sharedtable stores shared.
var sharedTable = bytes.Repeat([]byte{7}, artifact.SharedMinSize+1)

func init() {
	stages.Register(stages.Stage{
		Name: "test.sharedtable", Version: 1,
		Doc:     "Stores the same large table as a shared file whatever its salt (which only changes the node key).",
		Params:  []stages.Param{stages.StringParam("salt", "", "changes the node key, not the output")},
		Outputs: []stages.Port{{Name: "table", Kind: "embeddings"}},
		Run: func(c *stages.Context) error {
			p := filepath.Join(c.WorkDir(), "table.bin")
			if err := os.WriteFile(p, sharedTable, 0o644); err != nil {
				return err
			}
			return c.Output("table").AddSharedFile("table.bin", p)
		},
	})
}

// Verify reads a file that artifacts share once, and reports every
// artifact that lists it when it rotted.
func TestVerifyReadsASharedFileOnce(t *testing.T) {
	ctx := context.Background()
	st, err := fsstore.Open(storeDir(t))
	if err != nil {
		t.Fatal(err)
	}
	c := embeddedOn(t, st, fastWorker())
	s := run(t, c, graph(t, "name: shared\nnodes:\n  a: {stage: test.sharedtable, params: {salt: a}}\n  b: {stage: test.sharedtable, params: {salt: b}}\n"))
	if s.State != engine.Succeeded {
		t.Fatalf("run %s: %s", s.State, s.Error)
	}
	r, err := c.submit.Verify(ctx, "", false)
	if err != nil {
		t.Fatal(err)
	}
	if r.Artifacts != 2 || r.Files != 2 || r.Bytes != int64(len(sharedTable)) || len(r.Damaged) != 0 {
		t.Errorf("verify: %d artifacts, %d files, %d bytes, damaged %v; want 2, 2, %d read once, none", r.Artifacts, r.Files, r.Bytes, r.Damaged, len(sharedTable))
	}

	path, err := st.Path(layout.Blob(storage.Digest(sharedTable)))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[0] ^= 1
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err = c.submit.Verify(ctx, "", false)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Damaged) != 2 {
		t.Fatalf("verify after the shared file rotted: damaged %+v, want both artifacts", r.Damaged)
	}
	for _, d := range r.Damaged {
		if len(d.Problems) != 1 || !strings.Contains(d.Problems[0], "table.bin") {
			t.Errorf("%s: problems %q", d.Output, d.Problems)
		}
	}
}
