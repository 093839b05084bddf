package corpus

import (
	"fmt"
	"io"
	"strings"
)

// The Tie-or-Break format (.ck) of AutoNER: one "token boundary type" line
// per token, where boundary is I (break: a new segment starts at this token)
// or O (tie: same segment as the previous token), and type is the segment's
// entity type or None for a non-entity. Each sentence is wrapped in
// "<s> O None" and "<eof> I None" lines and followed by a blank line.
//
// AutoNER's distantly labeled training files add a fourth column, S (safe)
// or D (dangerous: boundary unknown), and may give several comma-separated
// types for one segment. Hard tags can hold neither an unknown boundary nor
// a type set, so those lines are errors here rather than silently guessed.
const (
	ckStart = "<s>"
	ckEnd   = "<eof>"
	ckNone  = "None"
)

type ckDecoder struct {
	l    *lineReader
	o    *options
	done bool
}

func newCKDecoder(r io.Reader, name string, o *options) decoder {
	return &ckDecoder{l: newLineReader(r, name), o: o}
}

// ckSentence accumulates one sentence's tokens and segments.
type ckSentence struct {
	tokens   []string
	lines    []int // line of each token
	spans    []Span
	segType  string // type of the segment the last token is in; ckNone outside
	started  bool   // a <s> line was read
	line     int    // first line of the sentence
	docStart bool
}

func (d *ckDecoder) next() (Sentence, int, error) {
	var (
		s       ckSentence
		docNext bool
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
		fields := strings.Fields(line)
		if len(fields) == 0 {
			if s.started || len(s.tokens) > 0 {
				break
			}
			continue
		}
		if fields[0] == DocStart {
			if s.started || len(s.tokens) > 0 {
				return Sentence{}, 0, d.l.errorf(ErrSyntax, "%s inside a sentence (started on line %d)", DocStart, s.line)
			}
			docNext = true
			continue
		}
		if len(fields) < 3 || len(fields) > 4 {
			return Sentence{}, 0, d.l.errorf(ErrSyntax, "%d columns: want token, I or O, type and optionally S or D", len(fields))
		}
		if s.line == 0 {
			s.line, s.docStart = d.l.line, docNext
		}
		ended, err := d.token(&s, fields)
		if err != nil {
			return Sentence{}, 0, err
		}
		if ended {
			break
		}
	}
	if !s.started && len(s.tokens) == 0 {
		return Sentence{}, 0, io.EOF
	}
	if len(s.tokens) == 0 {
		return Sentence{}, 0, d.l.errorfAt(s.line, ErrSyntax, "empty sentence")
	}
	tags, err := d.o.spanScheme().Tags(s.spans, len(s.tokens))
	if err != nil {
		return Sentence{}, 0, d.l.wrapAt(s.line, err)
	}
	if i, err := d.o.badTag(tags); err != nil {
		return Sentence{}, 0, d.l.wrapAt(s.lines[i], err)
	}
	return Sentence{Tokens: s.tokens, Tags: tags, DocStart: s.docStart}, s.line, nil
}

// token adds one token line to s; ended reports an <eof> marker.
func (d *ckDecoder) token(s *ckSentence, fields []string) (ended bool, err error) {
	token, boundary, typ := fields[0], fields[1], fields[2]
	brk := boundary == "I" || boundary == "B" // AutoNER reads B as I
	if !brk && boundary != "O" {
		return false, d.l.errorf(ErrSyntax, "boundary %q: want I (break) or O (tie)", boundary)
	}
	if len(fields) == 4 {
		switch fields[3] {
		case "S":
		case "D":
			return false, d.l.errorf(ErrSyntax, "boundary marked D (unknown) cannot be read into hard tags")
		default:
			return false, d.l.errorf(ErrSyntax, "fourth column %q: want S (safe) or D (dangerous)", fields[3])
		}
	}
	switch token {
	case ckStart:
		if s.started || len(s.tokens) > 0 {
			return false, d.l.errorf(ErrSyntax, "%s marker inside a sentence (started on line %d)", ckStart, s.line)
		}
		s.started = true
		return false, nil
	case ckEnd:
		if len(s.tokens) == 0 {
			return false, d.l.errorf(ErrSyntax, "%s marker ends an empty sentence", ckEnd)
		}
		return true, nil
	}
	if strings.Contains(typ, ",") {
		return false, d.l.errorf(ErrSyntax, "type %q names several types; hard tags need one", typ)
	}
	i := len(s.tokens)
	s.tokens = append(s.tokens, token)
	s.lines = append(s.lines, d.l.line)
	switch {
	case brk && typ == ckNone:
		s.segType = ckNone
	case brk:
		s.spans = append(s.spans, Span{Start: i, End: i + 1, Label: typ})
		s.segType = typ
	case i == 0 && typ != ckNone:
		return false, d.l.errorf(ErrSyntax, "tie (O) on the first token of a sentence, which has no segment to continue")
	case i > 0 && typ != s.segType:
		return false, d.l.errorf(ErrSyntax, "tie (O) joins type %q to a segment of type %q", typ, s.segType)
	case typ != ckNone:
		s.spans[len(s.spans)-1].End = i + 1
	default:
		s.segType = ckNone
	}
	return false, nil
}

type ckEncoder struct{ w errWriter }

func newCKEncoder(w io.Writer, _ *options) encoder { return &ckEncoder{w: errWriter{w: w}} }

func (e *ckEncoder) encode(i int, s Sentence) error {
	if err := checkSentence(i, s, true); err != nil {
		return err
	}
	for j, tok := range s.Tokens {
		if tok == ckStart || tok == ckEnd || tok == DocStart {
			return fmt.Errorf("sentence %d: token %d is %s, a marker of the .ck format", i+1, j+1, tok)
		}
	}
	types := make([]string, len(s.Tokens)) // "" outside entities
	begins := make([]bool, len(s.Tokens))
	if s.Tags != nil {
		spans, err := AnyScheme.Spans(s.Tags)
		if err != nil {
			return fmt.Errorf("sentence %d: %w", i+1, err)
		}
		for _, sp := range spans {
			if sp.Label == ckNone || strings.Contains(sp.Label, ",") {
				return fmt.Errorf("sentence %d: entity type %q cannot be written to .ck, where None means a non-entity and commas separate types", i+1, sp.Label)
			}
			begins[sp.Start] = true
			for k := sp.Start; k < sp.End; k++ {
				types[k] = sp.Label
			}
		}
	}
	if s.DocStart {
		e.w.print(DocStart, "\n\n")
	}
	e.w.print(ckStart, " O ", ckNone, "\n")
	for j, tok := range s.Tokens {
		switch {
		case types[j] == "":
			e.w.print(tok, " I ", ckNone, "\n")
		case begins[j]:
			e.w.print(tok, " I ", types[j], "\n")
		default:
			e.w.print(tok, " O ", types[j], "\n")
		}
	}
	e.w.print(ckEnd, " I ", ckNone, "\n\n")
	return e.w.err
}
