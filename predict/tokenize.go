package predict

import (
	"unicode"
	"unicode/utf8"
)

// Token is a token of a raw text with its position: bytes [Start, End) of
// the UTF-8 text.
type Token struct {
	Text  string `json:"text"`
	Start int    `json:"start"`
	End   int    `json:"end"`
}

// MaxSentenceTokens bounds the sentences Tokenize returns: a longer run of
// tokens without end punctuation (a list, a table) is cut, so that one
// request cannot make a batch arbitrarily long.
const MaxSentenceTokens = 200

// Tokenize splits raw text into sentences of tokens the way CoNLL-2003's
// text is tokenized: words (letters, digits and marks, joined across inner
// apostrophes, hyphens, periods and ampersands: "O'Neil", "U.S.", "AT&T",
// "3.5"), and every other visible character on its own. Sentences end after
// ".", "!" or "?" tokens and at line breaks.
func Tokenize(text string) [][]Token {
	var (
		sents [][]Token
		cur   []Token
	)
	flush := func() {
		if len(cur) > 0 {
			sents = append(sents, cur)
			cur = nil
		}
	}
	for i := 0; i < len(text); {
		r, n := utf8.DecodeRuneInString(text[i:])
		switch {
		case r == '\n':
			flush()
			i += n
		case unicode.IsSpace(r) || !unicode.IsGraphic(r):
			i += n
		case isWordRune(r):
			end := wordEnd(text, i)
			cur = append(cur, Token{Text: text[i:end], Start: i, End: end})
			i = end
		default:
			cur = append(cur, Token{Text: text[i : i+n], Start: i, End: i + n})
			i += n
			if r == '.' || r == '!' || r == '?' {
				flush()
			}
		}
		if len(cur) >= MaxSentenceTokens {
			flush()
		}
	}
	flush()
	return sents
}

func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r)
}

func isJoiner(r rune) bool {
	switch r {
	case '\'', '’', '-', '.', '&':
		return true
	}
	return false
}

// wordEnd returns the end of the word starting at i. A joiner belongs to
// the word when a word rune follows it; a final period belongs to it when
// the word is an abbreviation with inner periods ("U.S.").
func wordEnd(text string, i int) int {
	innerPeriod := false
	for i < len(text) {
		r, n := utf8.DecodeRuneInString(text[i:])
		if isWordRune(r) {
			i += n
			continue
		}
		if !isJoiner(r) {
			return i
		}
		next, _ := utf8.DecodeRuneInString(text[i+n:])
		if i+n < len(text) && isWordRune(next) {
			innerPeriod = innerPeriod || r == '.'
			i += n
			continue
		}
		if r == '.' && innerPeriod {
			return i + n
		}
		return i
	}
	return i
}
