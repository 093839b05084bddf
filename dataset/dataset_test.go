package dataset

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/stages/stagestest"
	"github.com/nerflow/nerflow/storage/fsstore"
)

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const (
	text   = "John lives in Paris .\nMary left .\n"
	labels = "B-PER O O B-LOC O\nB-PER O O\n"
	conll  = "John B-PER\nlives O\n\nMary B-PER\n"
)

func TestSourceReadFile(t *testing.T) {
	dir := writeFiles(t, map[string]string{"text.txt": text, "labels.txt": labels, "short.txt": "B-PER O\nO O O\n",
		"a.conll": conll, "a.data": conll})
	p := func(name string) string { return filepath.Join(dir, name) }

	c, err := Source{File: p("text.txt"), Labels: p("labels.txt")}.ReadFile()
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Sentences) != 2 || strings.Join(c.Sentences[0].Tags, " ") != "B-PER O O B-LOC O" {
		t.Errorf("text and labels: %+v", c.Sentences)
	}
	c, err = Source{File: p("a.conll")}.ReadFile()
	if err != nil || len(c.Sentences) != 2 || c.Sentences[1].Tags[0] != "B-PER" {
		t.Errorf("conll: %v %+v", err, c)
	}
	if c, err = (Source{File: p("a.data"), Format: corpus.FormatCoNLL}).ReadFile(); err != nil || len(c.Sentences) != 2 {
		t.Errorf("named format: %v %+v", err, c)
	}

	// Bad input names the file and line.
	for _, tc := range []struct {
		src  Source
		want string
	}{
		{Source{File: p("text.txt"), Labels: p("short.txt")}, "short.txt:1"},
		{Source{File: p("a.data")}, "a.data"},
		{Source{File: p("a.conll"), Labels: p("labels.txt"), Format: corpus.FormatCoNLL}, "labels file goes with a text file"},
		{Source{File: p("a.conll"), Format: "xml"}, "unknown corpus format"},
	} {
		if _, err := tc.src.ReadFile(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.src, err, tc.want)
		}
	}
}

// A stage reads a corpus port from the parameters SourceParams declares.
func TestReadInput(t *testing.T) {
	ctx := context.Background()
	st, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a := stagestest.ImportFiles(t, st, map[string][]byte{"text.txt": []byte(text), "labels.txt": []byte(labels), "bad.txt": []byte("B-PER\n")})
	in := stages.NewInput(ctx, st, a)
	stage := stages.Stage{Name: "test.read", Params: SourceParams("corpus", "sentences")}
	read := func(raw map[string]any) (*corpus.Corpus, error) {
		p, err := stage.ResolveParams(raw)
		if err != nil {
			t.Fatal(err)
		}
		return ReadInput(in, p, "corpus")
	}
	c, err := read(map[string]any{"corpus_file": "text.txt", "corpus_labels": "labels.txt"})
	if err != nil || len(c.Sentences) != 2 || c.Sentences[1].Tags[0] != "B-PER" {
		t.Fatalf("%v %+v", err, c)
	}
	// An artifact whose producer described it is read in its format, whatever
	// its file's name.
	described := stagestest.ImportFiles(t, st, map[string][]byte{"labeled.out": []byte(conll)})
	described.Meta = map[string]string{MetaFormat: string(corpus.FormatCoNLL)}
	p, err := stage.ResolveParams(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := ReadInput(stages.NewInput(ctx, st, described), p, "corpus"); err != nil || len(c.Sentences) != 2 {
		t.Errorf("described artifact: %v %+v", err, c)
	}

	for _, tc := range []struct {
		raw  map[string]any
		want string
	}{
		{map[string]any{}, "input corpus: the artifact has 3 files"},
		{map[string]any{"corpus_file": "text.txt", "corpus_labels": "bad.txt"}, "bad.txt:1"},
		{map[string]any{"corpus_file": "missing.txt"}, "missing.txt"},
	} {
		_, err := read(tc.raw)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !stages.IsPermanent(err) {
			t.Errorf("%v: error %v, want a permanent error with %q", tc.raw, err, tc.want)
		}
	}
}

func TestPredictionsRoundTrip(t *testing.T) {
	in := &Predictions{Scheme: "io", Tags: []string{"O", "I-PER"}, Sentences: []Prediction{
		{Tags: []string{"I-PER", "O"}, Probs: [][]float32{{0.25, 0.75}, {0.5, 0.5}}},
		{Tags: []string{}, Probs: [][]float32{}},
	}}
	var b strings.Builder
	if err := WritePredictions(&b, in); err != nil {
		t.Fatal(err)
	}
	out, err := ReadPredictions(strings.NewReader(b.String()), "p.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if out.Scheme != "io" || strings.Join(out.Tags, " ") != "O I-PER" || len(out.Sentences) != 2 ||
		out.Sentences[0].Probs[0][1] != 0.75 || strings.Join(out.HardTags()[0], " ") != "I-PER O" || out.Soft()[0][1][0] != 0.5 {
		t.Errorf("read back %+v", out)
	}

	header := `{"scheme":"io","labels":["O","I-PER"]}` + "\n"
	for _, tc := range []struct{ file, want string }{
		{"", "p.jsonl: empty file"},
		{`{"scheme":"io","labels":[]}` + "\n", "p.jsonl:1: header has no labels"},
		{header + `{"tags":["O"],"probs":[[1,0]]}` + "\n" + `{"tags":["O"],"probs":[]}` + "\n", "p.jsonl:3: 1 tags but 0 probability rows"},
		{header + `{"tags":["O"],"probs":[[1]]}` + "\n", "p.jsonl:2: token 1 has 1 probabilities for 2 labels"},
		{header + "{not json\n", "p.jsonl:2:"},
	} {
		if _, err := ReadPredictions(strings.NewReader(tc.file), "p.jsonl"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.file, err, tc.want)
		}
	}
}

func TestScanTags(t *testing.T) {
	dir := writeFiles(t, map[string]string{"labels.txt": labels, "a.conll": conll})
	for name, want := range map[string]int{"labels.txt": 2, "a.conll": 2} {
		sc, err := ScanTags(filepath.Join(dir, name), "")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for sc.Scan() {
			n++
		}
		sc.Close()
		if sc.Err() != nil || n != want {
			t.Errorf("%s: %d sentences, %v", name, n, sc.Err())
		}
	}
}
