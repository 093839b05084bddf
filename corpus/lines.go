package corpus

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxLineBytes bounds one line; bufio.Scanner's default 64 KiB is too small
// for a long sentence in JSON or a document on one line.
const maxLineBytes = 64 << 20

// lineReader streams a file's lines, counting them for error messages and
// refusing invalid UTF-8.
type lineReader struct {
	name string
	sc   *bufio.Scanner
	line int // number of the line last returned, 1-based
}

func newLineReader(r io.Reader, name string) *lineReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLineBytes)
	return &lineReader{name: name, sc: sc}
}

// next returns the next line without its line ending (\n or \r\n); ok is
// false at the end of the input.
func (l *lineReader) next() (line string, ok bool, err error) {
	if !l.sc.Scan() {
		if err := l.sc.Err(); err != nil {
			if errors.Is(err, bufio.ErrTooLong) {
				return "", false, l.errorfAt(l.line+1, ErrSyntax, "line longer than %d MiB", maxLineBytes>>20)
			}
			return "", false, &ParseError{File: l.name, Line: l.line + 1, Err: fmt.Errorf("reading: %w", err)}
		}
		return "", false, nil
	}
	l.line++
	b := l.sc.Bytes()
	if !utf8.Valid(b) {
		return "", false, l.errorf(ErrInvalidUTF8, "invalid UTF-8 at byte %d of the line", invalidAt(b)+1)
	}
	return string(b), true, nil
}

// errorf reports a problem on the line last returned.
func (l *lineReader) errorf(kind error, format string, args ...any) error {
	return l.errorfAt(l.line, kind, format, args...)
}

func (l *lineReader) errorfAt(line int, kind error, format string, args ...any) error {
	return &ParseError{File: l.name, Line: line, Err: problem(kind, format, args...)}
}

// wrapAt puts an existing problem at a line.
func (l *lineReader) wrapAt(line int, err error) error {
	return &ParseError{File: l.name, Line: line, Err: err}
}

// invalidAt returns the offset of the first byte of b that is not valid UTF-8.
func invalidAt(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return len(b)
}

// isBlank reports whether a line holds only white space.
func isBlank(line string) bool { return strings.TrimFunc(line, unicode.IsSpace) == "" }
