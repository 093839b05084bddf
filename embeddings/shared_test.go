package embeddings

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/storage/artifact"
	"github.com/nerflow/nerflow/storage/fsstore"
)

// The table of a package is stored once, however many times the stage
// runs with other corpora: each output refers to the shared copy.
func TestTableStoredOnce(t *testing.T) {
	ctx := context.Background()
	st, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// A package large enough that its table is shared: 3000 words of 100
	// dimensions (1.2 MB of float32).
	const words, dims = 3000, 100
	doc := syntheticWink(words, dims, func(w, i int) string {
		if i == dims {
			return "1" // the norm
		}
		return fmt.Sprintf("%d.5", (w+i)%7)
	})
	dir := t.TempDir()
	for name, content := range map[string]string{"wink/" + winkJSON: doc, "a/train.txt": "w1 w2 .\n", "b/train.txt": "w3 .\n"} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	imp := func(p string) stages.Artifact {
		a, err := stages.Import(ctx, st, "datasets", filepath.Join(dir, p), "")
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	s, _ := stages.Lookup(StageName)
	params, _ := s.ResolveParams(nil)
	var outs []artifact.Manifest
	for _, corpus := range []string{"a", "b"} {
		o, err := stages.Exec(ctx, s, stages.Env{Store: st, Params: params, OutputPrefix: "out-" + corpus,
			Inputs: map[string][]stages.Artifact{"vectors": {imp("wink")}, "corpora": {imp(corpus)}}})
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, o["embeddings"])
	}
	f0, _ := outs[0].File(FileName)
	f1, _ := outs[1].File(FileName)
	if !f0.Shared() || f0.Blob != f1.Blob || f0.Size < artifact.SharedMinSize {
		t.Fatalf("the tables are %+v and %+v, want one shared blob", f0, f1)
	}
	tab, err := ReadInput(stages.NewInput(ctx, st, outs[1]), "embeddings")
	if err != nil || tab.Len() != words {
		t.Fatalf("reading the shared table: %d words, %v", tab.Len(), err)
	}
	objs, err := st.List(ctx, "out-")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if !strings.HasSuffix(o.Key, artifact.ManifestSuffix) {
			t.Errorf("%s is stored under an output's prefix, want only the manifests there (the table is shared)", o.Key)
		}
	}
}
