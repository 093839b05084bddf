package distant

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/train/overlay"
)

// A sentence's first word is capitalized by rule, so its capital says
// nothing of a name; a tagger that learned that capitalized words are
// names (from capitalized phrases above all) still tags "Dealers said ..."
// as an organization (docs/accuracy.md, "The gate of a sentence's first
// word", counts them). Whether a first word is a name the rest of the text
// says: a word the training text writes in lower case
// more often than capitalized inside a sentence is a common word there.
//
// FirstWords is the overlay that says so at prediction: it finds no
// entity of its own, and as a Gate (overlay.Attached.Gated) it takes such
// a first word off the tagger's entity that begins with it, the entity
// dropped if that was its only word ("The United States" keeps "United
// States"; "Dealers" goes). Attached in mode fill, it changes nothing
// else.
type FirstWords struct {
	words map[string]bool // the text's common words, lower-case
}

// firstWordsSaved is firstWordsFile's content.
type firstWordsSaved struct {
	Words []string `json:"words"`
}

// FirstWordsKind is FirstWords' kind in a checkpoint (package overlay).
const FirstWordsKind = "first-words"

// firstWordsFile holds the common words, in the checkpoint's overlay.Dir.
const firstWordsFile = "first-words.json"

func init() { overlay.Register(FirstWordsKind, loadFirstWords) }

// NewFirstWords counts the words of text: a word is common where its
// lower-case form occurs at least minLower times and more often than its
// capitalized forms do anywhere but at a sentence's first word.
func NewFirstWords(text *corpus.Corpus, minLower int) *FirstWords {
	capital := map[string]int{}
	for _, s := range text.Sentences {
		start := slices.IndexFunc(s.Tokens, hasLetterOrDigit) // quotes and dashes before it are not the first word
		for i, tok := range s.Tokens {
			if i != start && isCapitalized(tok) {
				capital[strings.ToLower(tok)]++
			}
		}
	}
	words := map[string]bool{}
	for w, n := range lowerCounts(text) {
		if n >= minLower && n > capital[w] {
			words[w] = true
		}
	}
	return &FirstWords{words: words}
}

// Len is the number of common words.
func (f *FirstWords) Len() int { return len(f.words) }

// common tells whether tok, a sentence's first word, is a common word
// capitalized by rule. A word written all in capitals is an acronym (EU,
// NATO) whatever its lower-case form.
func (f *FirstWords) common(tok string) bool {
	if !isCapitalized(tok) || !strings.ContainsFunc(tok, unicode.IsLower) {
		return false
	}
	return f.words[strings.ToLower(tok)]
}

// Kind implements overlay.Overlay.
func (f *FirstWords) Kind() string { return FirstWordsKind }

// Spans implements overlay.Overlay: the overlay finds no entity.
func (f *FirstWords) Spans([]string) []corpus.Span { return nil }

// Admit implements overlay.Gate: the tagger's entity that begins with a
// common first word loses it, and is dropped where it was that word alone.
// own, the overlay's entities, is empty and returned as it is.
func (f *FirstWords) Admit(tokens []string, own, model []corpus.Span) (admitted, kept []corpus.Span) {
	start := slices.IndexFunc(tokens, hasLetterOrDigit)
	k := slices.IndexFunc(model, func(sp corpus.Span) bool { return sp.Start == start })
	if k < 0 || !f.common(tokens[start]) {
		return model, own
	}
	admitted = slices.Clone(model)
	if e := admitted[k]; e.End-e.Start == 1 {
		admitted = slices.Delete(admitted, k, k+1)
	} else {
		admitted[k].Start++
	}
	return admitted, own
}

// Save implements overlay.Overlay.
func (f *FirstWords) Save(dir string) error {
	b, err := json.Marshal(firstWordsSaved{Words: slices.Sorted(maps.Keys(f.words))})
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, firstWordsFile), b, 0o644)
}

func loadFirstWords(dir string) (overlay.Overlay, error) {
	var saved firstWordsSaved
	if err := readJSONFile(filepath.Join(dir, firstWordsFile), &saved); err != nil {
		return nil, err
	}
	words := make(map[string]bool, len(saved.Words))
	for _, w := range saved.Words {
		words[w] = true
	}
	return &FirstWords{words: words}, nil
}
