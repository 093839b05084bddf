package embeddings

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A wink-shaped file with 3-dimensional vectors: components, norm, index.
const winkFixture = `{"precision":8,"l2NormIndex":3,"wordIndex":4,"size":4,"dimensions":3,
"words":["the",",","germany","lamb"],
"vectors":{"the":[0.5,-1,0,1.118,0],",":[1,1,1,1.732,1],
"germany":[0.25,0.5,-0.75,0.935,2],"lamb":[2,0,-2,2.828,3]},
"unkVector":[0,0,0,0,0]}`

// syntheticWink returns a wink-shaped document of n words ("w0", "w1", ...)
// with dim components each, then the norm and the word's index; number
// writes component i of word w (i == dim: the norm).
func syntheticWink(n, dim int, number func(w, i int) string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"precision":8,"l2NormIndex":%d,"wordIndex":%d,"size":%d,"dimensions":%d,"words":[`, dim, dim+1, n, dim)
	for w := range n {
		if w > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"w%d"`, w)
	}
	b.WriteString(`],"vectors":{`)
	for w := range n {
		if w > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"w%d":[`, w)
		for i := range dim + 1 {
			b.WriteString(number(w, i))
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d]", w)
	}
	b.WriteString(`},"unkVector":[]}`)
	return b.String()
}

func TestReadWinkSelects(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
		want []string
	}{
		{"nothing", nil, nil},
		{"frequent", []Option{Frequent(2)}, []string{"the", ","}},
		{"words by key", []Option{Words("GERMANY", "Lamb", "absent")}, []string{"germany", "lamb"}},
		{"both", []Option{Frequent(1), Words("lamb")}, []string{"the", "lamb"}},
		{"all", []Option{All()}, []string{"the", ",", "germany", "lamb"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab, err := ReadWink(strings.NewReader(winkFixture), tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			if tab.Dim != 3 || !slices.Equal(tab.Words, tc.want) {
				t.Fatalf("got dim %d words %q, want 3 %q", tab.Dim, tab.Words, tc.want)
			}
		})
	}
}

func TestLookupAndVectors(t *testing.T) {
	tab, err := ReadWink(strings.NewReader(winkFixture), All())
	if err != nil {
		t.Fatal(err)
	}
	i, ok := tab.Lookup("GerMany")
	if !ok {
		t.Fatal("Germany not found under its lower-case key")
	}
	if got, want := tab.Vector(i), []float32{0.25, 0.5, -0.75}; !slices.Equal(got, want) {
		t.Fatalf("vector of germany = %v, want %v (norm and index dropped)", got, want)
	}
	if _, ok := tab.Lookup("1996"); ok {
		t.Fatal("found a number that is not in the table")
	}
}

func TestShape(t *testing.T) {
	for in, want := range map[string]string{
		"1996-08-22": "0000-00-00",
		"6-4":        "0-0",
		"G8":         "g0",
		"Germany":    "germany",
		"٣":          "0", // Arabic-Indic digit three
	} {
		if got := Shape(in); got != want {
			t.Errorf("Shape(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestWriteReadRoundTrip(t *testing.T) {
	tab, err := NewTable(2, []string{"a", "é", ""}, []float32{1, -2, 3.5, 0, -0.25, 1e-7})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Write(&buf, tab); err != nil {
		t.Fatal(err)
	}
	got, err := Read(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if got.Dim != 2 || !slices.Equal(got.Words, tab.Words) || !slices.Equal(got.Vectors, tab.Vectors) {
		t.Fatalf("round trip: got %+v", got)
	}
	// Every truncation is an error, never a shorter table.
	for n := 0; n < buf.Len(); n++ {
		if _, err := Read(bytes.NewReader(buf.Bytes()[:n])); err == nil {
			t.Fatalf("reading the first %d of %d bytes succeeded", n, buf.Len())
		}
	}
	if _, err := Read(bytes.NewReader(append(buf.Bytes(), 0))); err == nil {
		t.Fatal("trailing byte accepted")
	}
}

func TestNewTableRejectsBadInput(t *testing.T) {
	if _, err := NewTable(2, []string{"a", "a"}, make([]float32, 4)); err == nil {
		t.Error("duplicate word accepted")
	}
	if _, err := NewTable(2, []string{"a"}, make([]float32, 3)); err == nil {
		t.Error("wrong vector length accepted")
	}
}

func TestReadWinkErrors(t *testing.T) {
	for name, in := range map[string]string{
		"not an object":     `[]`,
		"vectors first":     `{"vectors":{}, "dimensions":3, "wordIndex":4}`,
		"short vector":      `{"dimensions":3,"wordIndex":4,"vectors":{"a":[1,2,0]}}`,
		"no vectors":        `{"dimensions":3,"wordIndex":4}`,
		"truncated":         winkFixture[:len(winkFixture)/2],
		"string in numbers": `{"dimensions":3,"wordIndex":4,"vectors":{"a":[1,"x",0,1,0]}}`,
	} {
		if _, err := ReadWink(strings.NewReader(in), All()); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestReadWinkFileFromPackage(t *testing.T) {
	dir := t.TempDir()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, body := range map[string]string{"package/README.md": "hi", "package/" + winkJSON: winkFixture} {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body))}); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, body)
	}
	tw.Close()
	zw.Close()
	tgz := filepath.Join(dir, "wink.tgz")
	if err := os.WriteFile(tgz, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	tab, err := ReadWinkFile(tgz, Words("lamb"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tab.Words, []string{"lamb"}) {
		t.Fatalf("words %q", tab.Words)
	}
	if _, err := ReadWinkFile(filepath.Join(dir, "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestWordRank(t *testing.T) {
	for in, want := range map[string]int{`[1,2,17]`: 17, `[0.5, 3]`: 3, `[1,2,17 ]`: -1, `[1,2.5]`: -1, `[]`: -1, `[42]`: 42} {
		if got := wordRank([]byte(in)); got != want {
			t.Errorf("wordRank(%s) = %d, want %d", in, got, want)
		}
	}
}
