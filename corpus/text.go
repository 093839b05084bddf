package corpus

import (
	"fmt"
	"io"
	"strings"
)

// textDecoder reads one sentence per line, and with a labels file the tags
// of line i from line i of that file.
type textDecoder struct {
	text   *lineReader
	labels *lineReader // nil without a labels file
	o      *options
}

func newTextDecoder(r io.Reader, name string, o *options) decoder {
	d := &textDecoder{text: newLineReader(r, name), o: o}
	if o.labels != nil {
		d.labels = newLineReader(o.labels, o.labelsName)
	}
	return d
}

func (d *textDecoder) next() (Sentence, int, error) {
	line, ok, err := d.text.next()
	if err != nil {
		return Sentence{}, 0, err
	}
	if d.labels == nil {
		if !ok {
			return Sentence{}, 0, io.EOF
		}
		tokens, err := fieldsOf(d.text, line, "sentence")
		return Sentence{Tokens: tokens}, d.text.line, err
	}
	labelLine, labelsOK, err := d.labels.next()
	if err != nil {
		return Sentence{}, 0, err
	}
	switch {
	case !ok && !labelsOK:
		return Sentence{}, 0, io.EOF
	case !ok:
		return Sentence{}, 0, d.labels.errorf(ErrCountMismatch, "labels for a sentence that %s lacks: it ends at line %d", d.text.name, d.text.line)
	case !labelsOK:
		return Sentence{}, 0, d.labels.errorfAt(d.labels.line+1, ErrCountMismatch, "no labels for %s:%d: the labels file ends early", d.text.name, d.text.line)
	}
	tokens, err := fieldsOf(d.text, line, "sentence")
	if err != nil {
		return Sentence{}, 0, err
	}
	tags, err := fieldsOf(d.labels, labelLine, "label sequence")
	if err != nil {
		return Sentence{}, 0, err
	}
	if len(tags) != len(tokens) {
		return Sentence{}, 0, d.text.errorf(ErrCountMismatch, "%d tokens but %s:%d has %d labels", len(tokens), d.labels.name, d.labels.line, len(tags))
	}
	if i, err := d.o.badTag(tags); err != nil {
		return Sentence{}, 0, d.labels.errorf(err, "label %d (token %q): %v", i+1, tokens[i], err)
	}
	return Sentence{Tokens: tokens, Tags: tags}, d.text.line, nil
}

// fieldsOf splits a line on white space, refusing blank lines: in the
// one-sentence-per-line formats a blank line would be an empty sentence,
// which no other format can hold, and is far more often a misalignment.
func fieldsOf(l *lineReader, line, what string) ([]string, error) {
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return nil, l.errorf(ErrSyntax, "blank line where a %s was expected (one sentence per line, none empty)", what)
	}
	return fields, nil
}

// labelsDecoder reads tags alone, one sentence per line.
type labelsDecoder struct {
	l *lineReader
	o *options
}

func newLabelsDecoder(r io.Reader, name string, o *options) decoder {
	return &labelsDecoder{l: newLineReader(r, name), o: o}
}

func (d *labelsDecoder) next() (Sentence, int, error) {
	line, ok, err := d.l.next()
	if err != nil {
		return Sentence{}, 0, err
	}
	if !ok {
		return Sentence{}, 0, io.EOF
	}
	tags, err := fieldsOf(d.l, line, "label sequence")
	if err != nil {
		return Sentence{}, 0, err
	}
	if i, err := d.o.badTag(tags); err != nil {
		return Sentence{}, 0, d.l.errorf(err, "label %d: %v", i+1, err)
	}
	return Sentence{Tags: tags}, d.l.line, nil
}

type textEncoder struct{ w errWriter }

func newTextEncoder(w io.Writer, _ *options) encoder { return &textEncoder{w: errWriter{w: w}} }

func (e *textEncoder) encode(i int, s Sentence) error {
	if err := checkSentence(i, s, true); err != nil {
		return err
	}
	e.w.print(strings.Join(s.Tokens, " "), "\n")
	return e.w.err
}

type labelsEncoder struct{ w errWriter }

func newLabelsEncoder(w io.Writer, _ *options) encoder { return &labelsEncoder{w: errWriter{w: w}} }

func (e *labelsEncoder) encode(i int, s Sentence) error {
	if len(s.Tags) == 0 {
		return fmt.Errorf("sentence %d: no tags to write", i+1)
	}
	if s.Tokens != nil {
		if err := checkSentence(i, s, false); err != nil {
			return err
		}
	}
	for j, tag := range s.Tags {
		if _, err := ParseTag(tag); err != nil {
			return fmt.Errorf("sentence %d: tag %d: %w", i+1, j+1, err)
		}
	}
	e.w.print(strings.Join(s.Tags, " "), "\n")
	return e.w.err
}
