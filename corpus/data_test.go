package corpus

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// sharedData returns a file of the benchmark data beside the repository
// (../shared/data), skipping the test where it is not laid out.
func sharedData(t *testing.T, rel string) string {
	t.Helper()
	path := filepath.Join("..", "..", "shared", "data", rel)
	if _, err := os.Stat(path); err != nil {
		t.Skipf("benchmark data not available: %v", err)
	}
	return path
}

// TestBC5CDRDevRoundTrip reads AutoNER's gold BC5CDR dev set and writes it
// back byte for byte.
func TestBC5CDRDevRoundTrip(t *testing.T) {
	path := sharedData(t, "bc5cdr/truth_dev.ck")
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Read(bytes.NewReader(orig), path, FormatCK, WithScheme(BIO), Strict(), WithTypes("Chemical", "Disease"))
	if err != nil {
		t.Fatal(err)
	}
	// Count entities independently of the reader: a segment starts at each
	// break line whose type is not None.
	want := bytes.Count(orig, []byte(" I Chemical\n")) + bytes.Count(orig, []byte(" I Disease\n"))
	got := 0
	for _, s := range c.Sentences {
		sp, err := BIO.Spans(s.Tags)
		if err != nil {
			t.Fatal(err)
		}
		got += len(sp)
	}
	if got != want {
		t.Errorf("%d entities read; the file has %d", got, want)
	}
	var out bytes.Buffer
	if err := Write(&out, c, FormatCK); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), orig) {
		t.Error("writing the dev set back does not reproduce the file")
	}
}

// TestCoNLL03TextLabels reads the CoNLL-2003 training text with its gold
// and distant labels.
func TestCoNLL03TextLabels(t *testing.T) {
	text := sharedData(t, "conll03/train_text.txt")
	for _, labels := range []string{"conll03/train_label_true.txt", "conll03/train_label_dist.txt"} {
		c, err := ReadTextLabels(text, sharedData(t, labels), WithScheme(BIO), WithTypes("PER", "ORG", "LOC", "MISC"))
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Sentences) != 14041 { // as data/README.md states
			t.Errorf("%s: %d sentences; want 14041", labels, len(c.Sentences))
		}
	}
}
