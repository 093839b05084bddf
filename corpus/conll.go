package corpus

import (
	"fmt"
	"io"
	"strings"
)

// DocStart is the token of CoNLL's document separator lines.
const DocStart = "-DOCSTART-"

// conllDecoder reads the CoNLL column format: white-space separated
// columns, one token per line, blank lines between sentences, DocStart lines
// between documents. A line of one column is an untagged token; a sentence
// must be all tagged or all untagged.
type conllDecoder struct {
	l       *lineReader
	o       *options
	docNext bool // a DocStart line was seen: the next sentence opens a document
	done    bool
}

func newCoNLLDecoder(r io.Reader, name string, o *options) decoder {
	return &conllDecoder{l: newLineReader(r, name), o: o}
}

func (d *conllDecoder) next() (Sentence, int, error) {
	var (
		s     Sentence
		lines []int // line of each token, to place tag errors
	)
	for !d.done {
		line, ok, err := d.l.next()
		if err != nil {
			return Sentence{}, 0, err
		}
		if !ok {
			d.done = true
			break
		}
		if d.o.comment != "" && strings.HasPrefix(line, d.o.comment) {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			if len(s.Tokens) > 0 {
				break
			}
			continue
		}
		if d.isDocStart(fields) {
			d.docNext = true
			if len(s.Tokens) > 0 {
				break // the marker ends the sentence even without a blank line
			}
			continue
		}
		token, tag, tagged, err := d.columns(fields)
		if err != nil {
			return Sentence{}, 0, err
		}
		if len(s.Tokens) == 0 {
			s.DocStart, d.docNext = d.docNext, false
		} else if tagged != (s.Tags != nil) {
			what := "no tag"
			if tagged {
				what = "a tag"
			}
			return Sentence{}, 0, d.l.errorf(ErrSyntax, "token %q has %s, unlike the earlier tokens of its sentence (from line %d)", token, what, lines[0])
		}
		s.Tokens = append(s.Tokens, token)
		if tagged {
			s.Tags = append(s.Tags, tag)
		}
		lines = append(lines, d.l.line)
	}
	if len(s.Tokens) == 0 {
		return Sentence{}, 0, io.EOF
	}
	if i, err := d.o.badTag(s.Tags); err != nil {
		return Sentence{}, 0, d.l.wrapAt(lines[i], err)
	}
	return s, lines[0], nil
}

// isDocStart recognizes a document separator line by its first column, where
// CoNLL files write it, or by the token column.
func (d *conllDecoder) isDocStart(fields []string) bool {
	if fields[0] == DocStart {
		return true
	}
	tok, ok := column(d.o.tokenCol, len(fields))
	return ok && fields[tok] == DocStart
}

// columns picks the token and tag out of a line's fields.
func (d *conllDecoder) columns(fields []string) (token, tag string, tagged bool, err error) {
	n := len(fields)
	tok, ok := column(d.o.tokenCol, n)
	if !ok {
		return "", "", false, d.l.errorf(ErrSyntax, "%d column(s), no token column %d", n, d.o.tokenCol)
	}
	if n == 1 {
		return fields[tok], "", false, nil
	}
	tg, ok := column(d.o.tagCol, n)
	if !ok || tg == tok {
		return "", "", false, d.l.errorf(ErrSyntax, "%d columns, no tag column %d distinct from the token column %d", n, d.o.tagCol, d.o.tokenCol)
	}
	return fields[tok], fields[tg], true, nil
}

// column resolves a possibly negative column number among n columns.
func column(c, n int) (int, bool) {
	if c < 0 {
		c += n
	}
	return c, c >= 0 && c < n
}

type conllEncoder struct{ w errWriter }

func newCoNLLEncoder(w io.Writer, _ *options) encoder { return &conllEncoder{w: errWriter{w: w}} }

func (e *conllEncoder) encode(i int, s Sentence) error {
	if err := checkSentence(i, s, true); err != nil {
		return err
	}
	if s.DocStart {
		e.w.print(DocStart, " ", Outside, "\n\n")
	}
	for j, tok := range s.Tokens {
		if tok == DocStart {
			return fmt.Errorf("sentence %d: token %d is %s, which CoNLL readers take for a document separator", i+1, j+1, DocStart)
		}
		e.w.print(tok)
		if s.Tags != nil {
			e.w.print(" ", s.Tags[j])
		}
		e.w.print("\n")
	}
	e.w.print("\n")
	return e.w.err
}
