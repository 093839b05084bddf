package embeddings

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// FileName is the name of the table's file in an embeddings artifact.
const FileName = "vectors.bin"

// magic starts every file written by Write; the last byte is the format
// version.
var magic = [8]byte{'N', 'F', 'E', 'M', 'B', 0, 0, 1}

// maxWordLen bounds a word's length when reading, so that a corrupt length
// cannot make Read allocate gigabytes.
const maxWordLen = 1 << 16

// Write stores the table in nerflow's binary embeddings format:
//
//	magic   8 bytes "NFEMB\x00\x00\x01"
//	dim     uvarint
//	count   uvarint
//	words   count times: uvarint byte length, UTF-8 bytes
//	vectors count*dim float32, little-endian, word by word
func Write(w io.Writer, t *Table) error {
	bw := bufio.NewWriter(w)
	bw.Write(magic[:])
	var buf [binary.MaxVarintLen64]byte
	put := func(v uint64) { bw.Write(buf[:binary.PutUvarint(buf[:], v)]) }
	put(uint64(t.Dim))
	put(uint64(len(t.Words)))
	for _, word := range t.Words {
		put(uint64(len(word)))
		bw.WriteString(word)
	}
	var f [4]byte
	for _, x := range t.Vectors {
		binary.LittleEndian.PutUint32(f[:], math.Float32bits(x))
		bw.Write(f[:])
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("embeddings: writing: %w", err)
	}
	return nil
}

// Read loads a table written by Write.
func Read(r io.Reader) (*Table, error) {
	br := bufio.NewReader(r)
	var m [8]byte
	if _, err := io.ReadFull(br, m[:]); err != nil {
		return nil, fmt.Errorf("embeddings: reading header: %w", noEOF(err))
	}
	if m != magic {
		return nil, fmt.Errorf("embeddings: not an embeddings file (or an unknown version): header % x", m[:])
	}
	dim, err := binary.ReadUvarint(br)
	if err != nil {
		return nil, fmt.Errorf("embeddings: reading dimension: %w", noEOF(err))
	}
	count, err := binary.ReadUvarint(br)
	if err != nil {
		return nil, fmt.Errorf("embeddings: reading word count: %w", noEOF(err))
	}
	if dim == 0 || dim > 1<<16 || count > 1<<26 {
		return nil, fmt.Errorf("embeddings: implausible header: %d words of dimension %d", count, dim)
	}
	words := make([]string, count)
	for i := range words {
		n, err := binary.ReadUvarint(br)
		if err != nil || n > maxWordLen {
			return nil, fmt.Errorf("embeddings: word %d: bad length: %w", i+1, noEOF(err))
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(br, b); err != nil {
			return nil, fmt.Errorf("embeddings: word %d: %w", i+1, noEOF(err))
		}
		words[i] = string(b)
	}
	vecs := make([]float32, int(count)*int(dim))
	// Whole words at a time: the full package is 34 million numbers, and a
	// read per number would dominate a tagger's load time.
	buf := make([]byte, 4*int(dim)*min(int(count), 4096))
	for start := 0; start < len(vecs); {
		chunk := buf[:min(len(buf), 4*(len(vecs)-start))]
		if n, err := io.ReadFull(br, chunk); err != nil {
			w := (start + n/4) / int(dim)
			return nil, fmt.Errorf("embeddings: vector of word %d (%q): %w", w+1, words[w], noEOF(err))
		}
		for j := 0; j < len(chunk); j += 4 {
			vecs[start+j/4] = math.Float32frombits(binary.LittleEndian.Uint32(chunk[j:]))
		}
		start += len(chunk) / 4
	}
	if _, err := br.ReadByte(); err != io.EOF {
		return nil, errors.New("embeddings: trailing bytes after the last vector")
	}
	return NewTable(int(dim), words, vecs)
}

// ReadFile loads a table written by Write from path.
func ReadFile(path string) (*Table, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("embeddings: %w", err)
	}
	defer f.Close()
	t, err := Read(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// noEOF reports a premature end of data as io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
