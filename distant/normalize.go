package distant

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// CaseMode says how letter case is compared between gazetteer phrases and
// corpus tokens.
type CaseMode int

const (
	// CaseExact matches tokens as written.
	CaseExact CaseMode = iota
	// CaseFold compares tokens under Unicode case folding, so "Aspirin",
	// "aspirin" and "ASPIRIN" are the same token.
	CaseFold
	// CaseVariants matches a phrase as written, in ALL UPPER CASE and in all
	// lower case, but not in other mixed forms. The lower-case form is left
	// out for phrases that contain a stopword, whose lower-case form is
	// likely ordinary text ("Heart Failure Society" vs "heart failure
	// society" is fine, "Of Mice and Men" vs "of mice and men" is not).
	// This is the rule of AutoNER's dictionary matcher.
	CaseVariants
)

var caseModeNames = map[CaseMode]string{CaseExact: "exact", CaseFold: "fold", CaseVariants: "variants"}

func (c CaseMode) String() string {
	if s, ok := caseModeNames[c]; ok {
		return s
	}
	return fmt.Sprintf("CaseMode(%d)", int(c))
}

// ParseCaseMode parses "exact", "fold" or "variants".
func ParseCaseMode(s string) (CaseMode, error) {
	for c, name := range caseModeNames {
		if strings.EqualFold(s, name) {
			return c, nil
		}
	}
	return 0, fmt.Errorf("unknown case mode %q (want exact, fold or variants)", s)
}

// UnicodeForm selects the Unicode normalization applied to phrases and
// tokens before they are compared.
type UnicodeForm int

const (
	// FormNone compares code points as they are.
	FormNone UnicodeForm = iota
	// FormNFC composes characters ("e" + combining acute -> "é").
	FormNFC
	// FormNFKC also folds compatibility characters (ligatures, full-width
	// letters, superscripts), which gazetteers scraped from the web are full of.
	FormNFKC
)

var unicodeFormNames = map[UnicodeForm]string{FormNone: "none", FormNFC: "nfc", FormNFKC: "nfkc"}

func (f UnicodeForm) String() string {
	if s, ok := unicodeFormNames[f]; ok {
		return s
	}
	return fmt.Sprintf("UnicodeForm(%d)", int(f))
}

// ParseUnicodeForm parses "none", "nfc" or "nfkc".
func ParseUnicodeForm(s string) (UnicodeForm, error) {
	for f, name := range unicodeFormNames {
		if strings.EqualFold(s, name) {
			return f, nil
		}
	}
	return 0, fmt.Errorf("unknown unicode form %q (want none, nfc or nfkc)", s)
}

// normalizer maps a token (from a phrase or from the corpus) to the string
// under which it is compared. The same normalizer must see both sides, or
// phrases and text would never meet.
type normalizer struct {
	fold bool
	form UnicodeForm
}

func newNormalizer(c CaseMode, f UnicodeForm) normalizer {
	return normalizer{fold: c == CaseFold, form: f}
}

// token returns the comparison form of s. Invisible format characters
// (zero-width spaces and joiners, byte-order marks, soft hyphens) are always
// dropped: they are never part of a word, and a gazetteer copied from a web
// page otherwise silently fails to match. ASCII tokens — nearly all of
// them — take a path that allocates only when case folding changes them.
func (n normalizer) token(s string) string {
	if isASCII(s) {
		if n.fold {
			return strings.ToLower(s)
		}
		return s
	}
	s = strings.Map(func(r rune) rune {
		if unicode.Is(unicode.Cf, r) {
			return -1
		}
		return r
	}, s)
	switch n.form {
	case FormNFC:
		s = norm.NFC.String(s)
	case FormNFKC:
		s = norm.NFKC.String(s)
	}
	if n.fold {
		// A Caser is not safe for concurrent use; one per call keeps the
		// normalizer a plain value that scanners may share.
		s = cases.Fold().String(s)
	}
	return s
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// Tokenizer splits a gazetteer phrase into tokens. It must split the way the
// corpus was tokenized, or multi-token phrases never match.
type Tokenizer func(phrase string) []string

// WhitespaceTokenizer splits at Unicode white space: the convention of
// already-tokenized gazetteers such as AutoNER's ("( R)-alpha - methylhistamine").
func WhitespaceTokenizer(phrase string) []string { return strings.Fields(phrase) }

// PunctTokenizer splits at white space and also makes every punctuation or
// symbol character a token of its own, as CoNLL-style corpora are tokenized
// ("U.S.-based" -> "U" "." "S" "." "-" "based"). Use it for gazetteers of
// untokenized names matched against text tokenized that way.
func PunctTokenizer(phrase string) []string {
	var toks []string
	start := -1
	for i, r := range phrase {
		switch {
		case unicode.IsSpace(r):
			if start >= 0 {
				toks = append(toks, phrase[start:i])
				start = -1
			}
		case unicode.IsPunct(r) || unicode.IsSymbol(r):
			if start >= 0 {
				toks = append(toks, phrase[start:i])
				start = -1
			}
			toks = append(toks, string(r))
		default:
			if start < 0 {
				start = i
			}
		}
	}
	if start >= 0 {
		toks = append(toks, phrase[start:])
	}
	return toks
}

// ParseTokenizer parses "whitespace" or "punct".
func ParseTokenizer(s string) (Tokenizer, error) {
	switch strings.ToLower(s) {
	case "whitespace", "space", "":
		return WhitespaceTokenizer, nil
	case "punct":
		return PunctTokenizer, nil
	}
	return nil, fmt.Errorf("unknown tokenizer %q (want whitespace or punct)", s)
}
