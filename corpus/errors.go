package corpus

import (
	"errors"
	"fmt"
)

// Sentinel problems wrapped by ParseError and the tag functions, so callers
// can tell kinds of bad input apart with errors.Is.
var (
	// ErrEmptyFile: a file holds no sentence at all.
	ErrEmptyFile = errors.New("empty file: no sentences")
	// ErrInvalidUTF8: a line is not valid UTF-8.
	ErrInvalidUTF8 = errors.New("invalid UTF-8")
	// ErrCountMismatch: tokens and tags (or two aligned files) disagree in number.
	ErrCountMismatch = errors.New("count mismatch")
	// ErrUnknownTag: a tag is malformed or not allowed in the scheme or type set.
	ErrUnknownTag = errors.New("unknown tag")
	// ErrInvalidSequence: tags are well-formed one by one but their order is
	// not valid in the scheme (I-PER after O in BIO, say).
	ErrInvalidSequence = errors.New("invalid tag sequence")
	// ErrBoundaryLost: the IO scheme cannot separate two adjacent entities of
	// the same type; converting to IO would merge them.
	ErrBoundaryLost = errors.New("IO scheme cannot mark the boundary between adjacent entities of the same type")
	// ErrSyntax: a line does not follow the format (bad columns, bad JSON,
	// span not on token boundaries, marker in the wrong place).
	ErrSyntax = errors.New("syntax error")
)

// ParseError reports bad input at a place in a file. Line is 1-based; 0
// means the problem concerns the whole file (it is empty, say).
type ParseError struct {
	File string
	Line int
	Err  error
}

func (e *ParseError) Error() string {
	if e.Line <= 0 {
		return fmt.Sprintf("%s: %v", e.File, e.Err)
	}
	return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
}

func (e *ParseError) Unwrap() error { return e.Err }

// problem builds an error that reads as msg but matches kind with errors.Is.
func problem(kind error, format string, args ...any) error {
	return &kindError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// kindError carries a human message and a sentinel kind; its text is only the
// message, because "path:12: 5 tokens but 4 labels" reads better than
// "path:12: count mismatch: 5 tokens but 4 labels".
type kindError struct {
	kind error
	msg  string
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }
