package embeddings

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/storage/fsstore"
)

func TestStage(t *testing.T) {
	ctx := context.Background()
	st, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string]string{
		"wink/" + winkJSON:     winkFixture,
		"data/train_text.txt":  "Lamb from Germany .\n",
		"data/train_label.txt": "O O B-LOC O\n", // "o" must not be taken for a word
		"data/dev.conll":       "The O\nthe O\n",
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
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
	params, err := s.ResolveParams(map[string]any{"all": false, "frequent": 1, "files": []any{"*_text.txt", "*.conll"}})
	if err != nil {
		t.Fatal(err)
	}
	outs, err := stages.Exec(ctx, s, stages.Env{Store: st, Params: params, OutputPrefix: "out",
		Inputs: map[string][]stages.Artifact{"vectors": {imp("wink")}, "corpora": {imp("data")}}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := stages.NewInput(ctx, st, outs["embeddings"]).ReadFile(FileName)
	if err != nil {
		t.Fatal(err)
	}
	tab, err := Read(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	// "the" is the most frequent word; "germany" and "lamb" are in the text
	// file; "," is neither.
	if !slices.Equal(tab.Words, []string{"the", "germany", "lamb"}) || outs["embeddings"].Meta["words"] != "3" {
		t.Fatalf("words %q, meta %v", tab.Words, outs["embeddings"].Meta)
	}

	// By default the artifact keeps every vector, "," included, so that a
	// tagger knows the words it first meets at prediction.
	params, _ = s.ResolveParams(nil)
	outs, err = stages.Exec(ctx, s, stages.Env{Store: st, Params: params, OutputPrefix: "all",
		Inputs: map[string][]stages.Artifact{"vectors": {imp("wink")}}})
	if err != nil {
		t.Fatal(err)
	}
	if b, err = stages.NewInput(ctx, st, outs["embeddings"]).ReadFile(FileName); err != nil {
		t.Fatal(err)
	}
	if tab, err = Read(bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	if _, ok := tab.Lookup(","); !ok || tab.Len() <= 3 {
		t.Fatalf("all: %d words %q", tab.Len(), tab.Words)
	}

	params, _ = s.ResolveParams(map[string]any{"files": []any{"["}})
	if _, err := stages.Exec(ctx, s, stages.Env{Store: st, Params: params, OutputPrefix: "out2",
		Inputs: map[string][]stages.Artifact{"vectors": {imp("wink")}}}); !stages.IsPermanent(err) {
		t.Fatalf("bad pattern: %v", err)
	}
}
