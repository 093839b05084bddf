package distant

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/nerflow/nerflow/corpus"
)

// Tie-or-Break labels are written in AutoNER's distant training format, the
// .ck format (see corpus/ck.go) with its fourth column: one line per token,
//
//	token  I|O  TYPES  S|D
//
// where I starts a new segment and O continues the previous token's, TYPES
// is None (no entity), ? (a phrase of unknown type) or the segment's types
// joined by commas, and D marks the gap before the token as unknown (S: as
// I or O say). Each sentence is wrapped in "<s> O None S" and
// "<eof> I None S" lines and followed by a blank line.
const (
	ckStart = "<s>"
	ckEnd   = "<eof>"
	ckNone  = "None"
)

// WriteTieBreak writes sentences in the Tie-or-Break .ck format.
func WriteTieBreak(w io.Writer, sentences []TieBreakSentence) error {
	bw := bufio.NewWriter(w)
	for i, s := range sentences {
		if len(s.Tokens) == 0 {
			return fmt.Errorf("tie-or-break sentence %d: no tokens", i+1)
		}
		if len(s.Gaps) != len(s.Tokens)-1 {
			return fmt.Errorf("tie-or-break sentence %d: %d gaps for %d tokens", i+1, len(s.Gaps), len(s.Tokens))
		}
		types := make([]string, len(s.Tokens))
		starts := make([]bool, len(s.Tokens))
		next := 0
		for _, sg := range s.Segments {
			if sg.Start != next || sg.End <= sg.Start || sg.End > len(s.Tokens) {
				return fmt.Errorf("tie-or-break sentence %d: segment [%d, %d) does not continue at token %d", i+1, sg.Start, sg.End, next)
			}
			col := ckNone
			if sg.Types != nil {
				for _, t := range sg.Types {
					if t == "" || t == ckNone || strings.ContainsAny(t, ", \t") || (t == corpus.UnknownType && len(sg.Types) > 1) {
						return fmt.Errorf("tie-or-break sentence %d: type set %q cannot be written (None means no entity, commas separate types, ? stands alone)", i+1, sg.Types)
					}
				}
				col = strings.Join(sg.Types, ",")
			}
			starts[sg.Start] = true
			for k := sg.Start; k < sg.End; k++ {
				types[k] = col
			}
			next = sg.End
		}
		if next != len(s.Tokens) {
			return fmt.Errorf("tie-or-break sentence %d: segments end at token %d of %d", i+1, next, len(s.Tokens))
		}
		fmt.Fprintf(bw, "%s O %s S\n", ckStart, ckNone)
		for j, tok := range s.Tokens {
			if tok == ckStart || tok == ckEnd || tok == "" || strings.ContainsAny(tok, " \t\n") {
				return fmt.Errorf("tie-or-break sentence %d: token %d %q cannot be written to .ck", i+1, j+1, tok)
			}
			brk, safe := "I", "S"
			if !starts[j] {
				brk = "O"
			}
			if j > 0 && s.Gaps[j-1] == UnknownBoundary {
				safe = "D"
			}
			fmt.Fprintf(bw, "%s %s %s %s\n", tok, brk, types[j], safe)
		}
		fmt.Fprintf(bw, "%s I %s S\n\n", ckEnd, ckNone)
	}
	return bw.Flush()
}

// ReadTieBreak reads sentences in the Tie-or-Break .ck format; name is the
// file's name in errors, which give its line.
func ReadTieBreak(r io.Reader, name string) ([]TieBreakSentence, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), maxLine)
	var (
		out  []TieBreakSentence
		cur  *TieBreakSentence
		line int
	)
	errorf := func(format string, args ...any) error {
		return fmt.Errorf("%s:%d: %s", name, line, fmt.Sprintf(format, args...))
	}
	for sc.Scan() {
		line++
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			if cur != nil {
				return nil, errorf("blank line inside a sentence: want %s before it", ckEnd)
			}
			continue
		}
		if len(f) != 4 {
			return nil, errorf("%d columns: want token, I or O, types, S or D", len(f))
		}
		tok, brk, col, safe := f[0], f[1], f[2], f[3]
		if brk != "I" && brk != "O" {
			return nil, errorf("boundary %q: want I (break) or O (tie)", brk)
		}
		if safe != "S" && safe != "D" {
			return nil, errorf("fourth column %q: want S (safe) or D (unknown boundary)", safe)
		}
		switch tok {
		case ckStart:
			if cur != nil {
				return nil, errorf("%s inside a sentence", ckStart)
			}
			cur = &TieBreakSentence{}
			continue
		case ckEnd:
			if cur == nil || len(cur.Tokens) == 0 {
				return nil, errorf("%s ends no sentence", ckEnd)
			}
			out = append(out, *cur)
			cur = nil
			continue
		}
		if cur == nil {
			return nil, errorf("token outside a sentence: want a %s line first", ckStart)
		}
		var types []string
		if col != ckNone {
			types = strings.Split(col, ",")
			if slices.Contains(types, "") || slices.Contains(types, ckNone) ||
				(len(types) > 1 && slices.Contains(types, corpus.UnknownType)) {
				return nil, errorf("types %q: want None, ? or entity types separated by commas", col)
			}
		}
		j := len(cur.Tokens)
		cur.Tokens = append(cur.Tokens, tok)
		if j == 0 {
			if brk != "I" || safe != "S" {
				return nil, errorf("the first token of a sentence must start a segment (I S)")
			}
			cur.Segments = append(cur.Segments, Segment{Start: 0, End: 1, Types: types})
			continue
		}
		last := &cur.Segments[len(cur.Segments)-1]
		gap := Break
		if brk == "O" {
			if !slices.Equal(last.Types, types) {
				return nil, errorf("O continues a segment of types %q with types %q", typesColumn(last.Types), col)
			}
			if last.Types == nil && safe == "S" {
				return nil, errorf("O ties a token to a non-entity (None) segment: non-entity tokens are segments of one token")
			}
			last.End++
			gap = Tie
		} else {
			cur.Segments = append(cur.Segments, Segment{Start: j, End: j + 1, Types: types})
		}
		if safe == "D" {
			gap = UnknownBoundary
		}
		cur.Gaps = append(cur.Gaps, gap)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", name, line+1, err)
	}
	if cur != nil {
		return nil, errorf("the last sentence has no %s line", ckEnd)
	}
	return out, nil
}

func typesColumn(types []string) string {
	if types == nil {
		return ckNone
	}
	return strings.Join(types, ",")
}
