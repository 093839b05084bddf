package corpus

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode"
)

// jsonLine is one line of FormatJSONL in either form.
type jsonLine struct {
	Tokens   []string    `json:"tokens"`
	Tags     []string    `json:"tags"`
	Text     *string     `json:"text"`
	Spans    *[]charSpan `json:"spans"`
	DocStart bool        `json:"doc_start"`
}

// charSpan is an entity in the span form: characters [Start, End) of the
// text, counted in Unicode code points as Python and spaCy count them.
type charSpan struct {
	Start *int   `json:"start"`
	End   *int   `json:"end"`
	Label string `json:"label"`
}

type jsonlDecoder struct {
	l *lineReader
	o *options
}

func newJSONLDecoder(r io.Reader, name string, o *options) decoder {
	return &jsonlDecoder{l: newLineReader(r, name), o: o}
}

func (d *jsonlDecoder) next() (Sentence, int, error) {
	for {
		line, ok, err := d.l.next()
		if err != nil {
			return Sentence{}, 0, err
		}
		if !ok {
			return Sentence{}, 0, io.EOF
		}
		if isBlank(line) {
			continue
		}
		s, err := d.decode(line)
		if err != nil {
			return Sentence{}, 0, d.l.wrapAt(d.l.line, err)
		}
		return s, d.l.line, nil
	}
}

func (d *jsonlDecoder) decode(line string) (Sentence, error) {
	var j jsonLine
	if err := json.Unmarshal([]byte(line), &j); err != nil {
		return Sentence{}, problem(ErrSyntax, "invalid JSON: %v", err)
	}
	var (
		s   Sentence
		err error
	)
	switch {
	case j.Text != nil && j.Tokens != nil:
		return Sentence{}, problem(ErrSyntax, `both "tokens" and "text": use one form`)
	case j.Text != nil:
		if j.Tags != nil {
			return Sentence{}, problem(ErrSyntax, `"tags" goes with "tokens"; with "text" give "spans"`)
		}
		s, err = d.spanForm(*j.Text, j.Spans)
	case j.Tokens != nil:
		if j.Spans != nil {
			return Sentence{}, problem(ErrSyntax, `"spans" goes with "text"; with "tokens" give "tags"`)
		}
		s, err = d.tokenForm(j.Tokens, j.Tags)
	default:
		return Sentence{}, problem(ErrSyntax, `neither "tokens" nor "text"`)
	}
	s.DocStart = j.DocStart
	return s, err
}

func (d *jsonlDecoder) tokenForm(tokens, tags []string) (Sentence, error) {
	if len(tokens) == 0 {
		return Sentence{}, problem(ErrSyntax, "empty sentence: no tokens")
	}
	for i, tok := range tokens {
		if tok == "" {
			return Sentence{}, problem(ErrSyntax, "tokens[%d] is empty", i)
		}
	}
	if tags != nil && len(tags) != len(tokens) {
		return Sentence{}, problem(ErrCountMismatch, "%d tokens but %d tags", len(tokens), len(tags))
	}
	if i, err := d.o.badTag(tags); err != nil {
		return Sentence{}, problem(err, "tags[%d] (token %q): %v", i, tokens[i], err)
	}
	return Sentence{Tokens: tokens, Tags: tags}, nil
}

// spanForm splits text on white space and maps the character spans onto
// the tokens; a span must start where a token starts and end where one ends.
func (d *jsonlDecoder) spanForm(text string, spans *[]charSpan) (Sentence, error) {
	var (
		tokens  []string
		startOf = map[int]int{} // code point offset -> token starting there
		endOf   = map[int]int{} // code point offset -> token ending there, plus one
		start   = -1
		runes   = []rune(text)
	)
	for i := 0; i <= len(runes); i++ {
		space := i == len(runes) || unicode.IsSpace(runes[i])
		switch {
		case !space && start < 0:
			start = i
		case space && start >= 0:
			startOf[start] = len(tokens)
			tokens = append(tokens, string(runes[start:i]))
			endOf[i] = len(tokens)
			start = -1
		}
	}
	if len(tokens) == 0 {
		return Sentence{}, problem(ErrSyntax, "empty sentence: no tokens in text")
	}
	s := Sentence{Tokens: tokens}
	if spans == nil {
		return s, nil
	}
	tokenSpans := make([]Span, 0, len(*spans))
	for i, cs := range *spans {
		if cs.Start == nil || cs.End == nil {
			return Sentence{}, problem(ErrSyntax, "spans[%d]: missing start or end", i)
		}
		b, e := *cs.Start, *cs.End
		if b < 0 || e > len(runes) || b >= e {
			return Sentence{}, problem(ErrSyntax, "spans[%d] [%d,%d) is not a non-empty range of the %d-character text", i, b, e, len(runes))
		}
		first, okStart := startOf[b]
		last, okEnd := endOf[e]
		if !okStart || !okEnd {
			return Sentence{}, problem(ErrSyntax, "spans[%d] [%d,%d) %q does not start and end on token boundaries (text is split on white space)", i, b, e, string(runes[b:e]))
		}
		tokenSpans = append(tokenSpans, Span{Start: first, End: last, Label: cs.Label})
	}
	tags, err := d.o.spanScheme().Tags(tokenSpans, len(tokens))
	if err != nil {
		return Sentence{}, err
	}
	if i, err := d.o.badTag(tags); err != nil {
		return Sentence{}, problem(err, "token %d %q: %v", i, tokens[i], err)
	}
	s.Tags = tags
	return s, nil
}

type jsonlEncoder struct {
	enc   *json.Encoder
	spans bool
}

func newJSONLEncoder(spans bool) func(io.Writer, *options) encoder {
	return func(w io.Writer, _ *options) encoder {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		return &jsonlEncoder{enc: enc, spans: spans}
	}
}

// spanLine is the span form as written.
type spanLine struct {
	Text     string  `json:"text"`
	Spans    *[]Span `json:"spans,omitempty"`
	DocStart bool    `json:"doc_start,omitempty"`
}

func (e *jsonlEncoder) encode(i int, s Sentence) error {
	if err := checkSentence(i, s, e.spans); err != nil {
		return err
	}
	if !e.spans {
		return e.enc.Encode(s)
	}
	out := spanLine{Text: strings.Join(s.Tokens, " "), DocStart: s.DocStart}
	if s.Tags != nil {
		spans, err := AnyScheme.Spans(s.Tags)
		if err != nil {
			return fmt.Errorf("sentence %d: %w", i+1, err)
		}
		// Token k starts at the code points of the tokens before it plus
		// one separating space each.
		offset := make([]int, len(s.Tokens)+1)
		for k, tok := range s.Tokens {
			offset[k+1] = offset[k] + len([]rune(tok)) + 1
		}
		chars := make([]Span, len(spans))
		for k, sp := range spans {
			chars[k] = Span{Start: offset[sp.Start], End: offset[sp.End] - 1, Label: sp.Label}
		}
		out.Spans = &chars
	}
	return e.enc.Encode(out)
}
