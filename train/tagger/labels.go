package tagger

import (
	"fmt"
	"slices"

	"github.com/nerflow/nerflow/corpus"
)

// Special targets of a token, besides a class index.
const (
	// ignored: the token contributes nothing to the loss (a distant O that
	// was randomly dropped, an unlabeled token).
	ignored = -1
	// anyEntity: an entity of unknown type (corpus.UnknownType). It counts
	// as "entity" where the type does not matter: the entity-vs-O head of the
	// token classifier, and for the CRF any entity tag.
	anyEntity = -2
)

// The hard targets of LossBatch.Targets besides tag indices.
const (
	Ignored   = ignored   // the token is left out of the loss
	AnyEntity = anyEntity // an entity of unknown type
)

// Labels is a tagger's tag set: the tags of a scheme over a list of entity
// types, each with a class index. Class 0 is always O; the entity tags
// follow, type by type, in the scheme's prefix order (B, I, E, S).
type Labels struct {
	Scheme corpus.Scheme
	Types  []string
	Tags   []string
	index  map[string]int
}

// NewLabels builds the tag set of scheme over types. IO, BIO and BIOES are
// supported (IOB1 is a reading format, not a training target).
func NewLabels(scheme corpus.Scheme, types []string) (*Labels, error) {
	var prefixes string
	switch scheme {
	case corpus.IO:
		prefixes = "I"
	case corpus.BIO:
		prefixes = "BI"
	case corpus.BIOES:
		prefixes = "BIES"
	default:
		return nil, fmt.Errorf("tagger scheme %s: want io, bio or bioes", scheme)
	}
	if len(types) == 0 {
		return nil, fmt.Errorf("no entity types")
	}
	l := &Labels{Scheme: scheme, Types: slices.Clone(types), Tags: []string{corpus.Outside}, index: map[string]int{corpus.Outside: 0}}
	for _, typ := range types {
		if typ == corpus.UnknownType {
			return nil, fmt.Errorf("%q (unknown type) cannot be a class", typ)
		}
		for _, p := range prefixes {
			tag := string(p) + "-" + typ
			if _, dup := l.index[tag]; dup {
				return nil, fmt.Errorf("entity type %q listed twice", typ)
			}
			l.index[tag] = len(l.Tags)
			l.Tags = append(l.Tags, tag)
		}
	}
	return l, nil
}

// NumTags is the number of classes, O included.
func (l *Labels) NumTags() int { return len(l.Tags) }

// Index returns the class of tag, or false when the tag set has none.
func (l *Labels) Index(tag string) (int, bool) {
	i, ok := l.index[tag]
	return i, ok
}

// encode maps a sentence's tags, already in the tag set's scheme, to
// targets: class indices, or anyEntity for tags of corpus.UnknownType.
func (l *Labels) encode(tags []string) ([]int32, error) {
	out := make([]int32, len(tags))
	for i, tag := range tags {
		if c, ok := l.index[tag]; ok {
			out[i] = int32(c)
			continue
		}
		t, err := l.Scheme.ParseTag(tag)
		if err == nil && t.Type == corpus.UnknownType {
			out[i] = anyEntity
			continue
		}
		return nil, fmt.Errorf("token %d: tag %q is not in the tag set %v", i+1, tag, l.Tags)
	}
	return out, nil
}

// Classes reads a sentence's tags in any scheme (conlleval's rules),
// converts them to the tag set's scheme and returns each token's class, or
// -1 for a token of an entity of unknown type (corpus.UnknownType).
func (l *Labels) Classes(tags []string) ([]int, error) {
	conv, err := convertTags(tags, l.Scheme)
	if err != nil {
		return nil, err
	}
	targets, err := l.encode(conv)
	if err != nil {
		return nil, err
	}
	out := make([]int, len(targets))
	for i, y := range targets {
		out[i] = int(max(y, -1))
	}
	return out, nil
}

// TypesOf returns the entity types a corpus uses, in order of first
// appearance, without corpus.UnknownType.
func TypesOf(c *corpus.Corpus) ([]string, error) {
	var types []string
	seen := map[string]bool{}
	for i, s := range c.Sentences {
		for j, tag := range s.Tags {
			t, err := corpus.ParseTag(tag)
			if err != nil {
				return nil, fmt.Errorf("sentence %d, token %d: %w", i+1, j+1, err)
			}
			if t.Prefix == 'O' || t.Type == corpus.UnknownType || seen[t.Type] {
				continue
			}
			seen[t.Type] = true
			types = append(types, t.Type)
		}
	}
	return types, nil
}
