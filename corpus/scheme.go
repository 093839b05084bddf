package corpus

import (
	"fmt"
	"strings"
	"unicode"
)

// Scheme is a tagging scheme: how per-token tags encode entity spans.
//
//   - IO: I-X inside an entity of type X, O outside. Two adjacent entities of
//     the same type cannot be told apart, so converting to IO can lose
//     boundaries (see ErrBoundaryLost and MergeAdjacent).
//   - BIO (IOB2): B-X begins every entity, I-X continues it.
//   - IOB1: I-X for entity tokens; B-X only on the first token of an entity
//     that directly follows another entity of the same type.
//   - BIOES (IOBES): B-X, I-X, E-X for the first, inner and last token of a
//     multi-token entity, S-X for a single-token entity.
//
// BIO, IOB1 and BIOES encode the same information, so conversions among them
// are lossless.
type Scheme uint8

// The supported schemes. The zero Scheme means "any": tags may use any of
// the prefixes B, I, E and S.
const (
	AnyScheme Scheme = iota
	IO
	BIO
	IOB1
	BIOES
)

var schemeNames = map[Scheme]string{AnyScheme: "any", IO: "io", BIO: "bio", IOB1: "iob1", BIOES: "bioes"}

// ParseScheme reads a scheme name: io, bio (or iob2), iob1, bioes (or iobes).
func ParseScheme(name string) (Scheme, error) {
	switch strings.ToLower(name) {
	case "io":
		return IO, nil
	case "bio", "iob2":
		return BIO, nil
	case "iob1":
		return IOB1, nil
	case "bioes", "iobes":
		return BIOES, nil
	}
	return 0, fmt.Errorf("unknown tag scheme %q (want io, bio, iob2, iob1, bioes or iobes)", name)
}

func (s Scheme) String() string {
	if n, ok := schemeNames[s]; ok {
		return n
	}
	return fmt.Sprintf("Scheme(%d)", uint8(s))
}

// prefixes returns the entity prefixes the scheme uses.
func (s Scheme) prefixes() string {
	switch s {
	case IO:
		return "I"
	case BIO, IOB1:
		return "BI"
	default:
		return "BIES"
	}
}

// Outside is the tag of tokens outside every entity.
const Outside = "O"

// Tag is a parsed tag: Prefix is 'O' for Outside, else one of B, I, E, S,
// with the entity Type.
type Tag struct {
	Prefix byte
	Type   string
}

func (t Tag) String() string {
	if t.Prefix == 'O' {
		return Outside
	}
	return string(t.Prefix) + "-" + t.Type
}

// ParseTag reads "O" or "P-TYPE" with P one of B, I, E, S. The type is
// everything after the first hyphen and may itself contain hyphens, but no
// white space (it could not be written to a column file).
func ParseTag(s string) (Tag, error) {
	if s == Outside {
		return Tag{Prefix: 'O'}, nil
	}
	if len(s) < 2 || s[1] != '-' {
		return Tag{}, problem(ErrUnknownTag, "unknown tag %q: want O or a prefix B, I, E or S, a hyphen and a type", s)
	}
	if !strings.ContainsRune("BIES", rune(s[0])) {
		return Tag{}, problem(ErrUnknownTag, "unknown tag %q: prefix %q is not one of B, I, E, S", s, s[:1])
	}
	typ := s[2:]
	if err := checkLabel(typ); err != nil {
		return Tag{}, problem(ErrUnknownTag, "unknown tag %q: %v", s, err)
	}
	return Tag{Prefix: s[0], Type: typ}, nil
}

// checkLabel accepts an entity type name: non-empty, no white space.
func checkLabel(label string) error {
	if label == "" {
		return fmt.Errorf("missing entity type")
	}
	if strings.IndexFunc(label, unicode.IsSpace) >= 0 {
		return fmt.Errorf("entity type %q contains white space", label)
	}
	return nil
}

// ParseTag parses a tag and checks that the scheme uses its prefix.
func (s Scheme) ParseTag(tag string) (Tag, error) {
	t, err := ParseTag(tag)
	if err != nil {
		return Tag{}, err
	}
	if t.Prefix != 'O' && !strings.ContainsRune(s.prefixes(), rune(t.Prefix)) {
		return Tag{}, problem(ErrUnknownTag, "unknown tag %q: the %s scheme has no %c- prefix", tag, s, t.Prefix)
	}
	return t, nil
}

// CheckTags checks every tag with ParseTag; the error names the first bad
// tag's 1-based index.
func (s Scheme) CheckTags(tags []string) error {
	if i, err := s.firstBadTag(tags); err != nil {
		return fmt.Errorf("tag %d: %w", i+1, err)
	}
	return nil
}

func (s Scheme) firstBadTag(tags []string) (int, error) {
	for i, tag := range tags {
		if _, err := s.ParseTag(tag); err != nil {
			return i, err
		}
	}
	return -1, nil
}

// Validate checks that tags are well-formed in the scheme and also that their
// order is: I-PER after O is tolerated by Spans (conlleval reads it as the
// start of an entity) but is not valid BIO. A sequence is valid exactly when
// encoding its spans again reproduces it. For AnyScheme only the tags
// themselves are checked. The error names the first bad tag's 1-based index.
func (s Scheme) Validate(tags []string) error {
	if i, err := s.firstInvalid(tags); err != nil {
		return fmt.Errorf("tag %d: %w", i+1, err)
	}
	return nil
}

// firstInvalid returns the 0-based index of the first tag that breaks
// Validate, and why.
func (s Scheme) firstInvalid(tags []string) (int, error) {
	if i, err := s.firstBadTag(tags); err != nil || s == AnyScheme {
		return i, err
	}
	spans, err := s.Spans(tags)
	if err != nil {
		return 0, err // not reached: every tag parsed above
	}
	canon, err := s.Tags(spans, len(tags))
	if err != nil {
		return 0, err // not reached: Spans never yields adjacent IO entities of one type
	}
	for i := range tags {
		if tags[i] != canon[i] {
			prev := "sentence start"
			if i > 0 {
				prev = fmt.Sprintf("%q", tags[i-1])
			}
			return i, problem(ErrInvalidSequence, "%q after %s is not valid %s (%s expected)", tags[i], prev, s, canon[i])
		}
	}
	return -1, nil
}
