package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/nerflow/nerflow/methods"
	_ "github.com/nerflow/nerflow/train/tagger" // the stages the methods make
)

func TestMethodsCommand(t *testing.T) {
	out, err := runCLI(t, "methods")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"bond", "distant", "supervised", "train, dev?, test?, vectors?, gazetteers[]?, stopwords?"} {
		if !strings.Contains(out, want) {
			t.Errorf("nerflow methods lacks %q:\n%s", want, out)
		}
	}
	out, err = runCLI(t, "methods", "distant")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"variants", `["ce","gce","gce-removal"]`, "ce|gce|gce-removal", "0..0.99", "gazetteer  any number (fan-in)"} {
		if !strings.Contains(out, want) {
			t.Errorf("nerflow methods distant lacks %q:\n%s", want, out)
		}
	}
	if _, err := runCLI(t, "methods", "no-such-method"); err == nil || !strings.Contains(err.Error(), `no method "no-such-method"`) {
		t.Errorf("unknown method: %v", err)
	}
}

// tinyConll is a corpus small enough to train on in a test.
const tinyConll = `John B-PER
lives O
in O
Paris B-LOC
. O

Mary B-PER
visited O
Berlin B-LOC
. O

Paris B-LOC
is O
big O
. O
`

// A method call runs like a hand-written spec, and what expand prints runs
// as the same nodes: all of them cached.
func TestRunMethodCallAndItsExpansion(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"train.conll", "dev.conll"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(tinyConll), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeSpec(t, dir, `
name: tiny
method: supervised
params: {epochs: 1, head: token, scheme: io}
inputs: {train: ./train.conll, dev: ./dev.conll}
overrides:
  train: {hidden: 4, word_dim: 4, char_dim: 2, char_filters: 2, casing_dim: 0, batch_size: 2, min_word_count: 1}
`)
	ctx := context.Background()
	out, err := runPipelineCLI(ctx, t, dir, "run", "spec.yaml", "--no-progress")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	if !strings.Contains(out, "3 nodes (3 done)") || !strings.Contains(out, "tiny@1") {
		t.Errorf("run of the method call:\n%s", out)
	}
	tree, err := runPipelineCLI(ctx, t, dir, "expand", "spec.yaml", "--tree")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tree, "\n    eval-train  train.evaluate  cpu") {
		t.Errorf("expand --tree:\n%s", tree)
	}
	y, err := runPipelineCLI(ctx, t, dir, "expand", "spec.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "expanded.yaml"), []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = runPipelineCLI(ctx, t, dir, "run", "expanded.yaml", "--no-progress")
	if err != nil {
		t.Fatalf("run expanded: %v\n%s\n%s", err, out, y)
	}
	if !strings.Contains(out, "3 nodes (3 cached)") {
		t.Errorf("the expanded spec does not make the same nodes:\n%s\n%s", out, y)
	}
}
