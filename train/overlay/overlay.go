// Package overlay combines a trained tagger's entities with those another
// source finds in the same sentence, at prediction: a dictionary is
// precise where it matches, and a tagger trained on a small corpus recalls
// what the dictionary lacks (spaCy's entity ruler beside its ner does the
// same). A checkpoint holding a directory Dir is such a tagger.
//
// The package knows an overlay only by its interface and the kind recorded
// in the checkpoint, as database/sql knows its drivers: package distant
// implements the gazetteer's and registers it at init, and package
// train/tagger loads whatever kind a checkpoint names and combines its
// entities with its own. So the tagger knows nothing of matching, and
// distant nothing of taggers.
package overlay

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/dataset"
)

// Files of an overlay in a checkpoint.
const (
	// Dir is the checkpoint's directory holding the overlay.
	Dir = "overlay"
	// File, in Dir, records the overlay's kind and mode; the kind's own
	// files sit beside it.
	File = "overlay.json"
)

// Mode says how an overlay's entities combine with the tagger's.
type Mode string

const (
	// Fill keeps the tagger's entities and adds each overlay entity that
	// overlaps none of them.
	Fill Mode = "fill"
	// Override keeps each overlay entity and adds the tagger's entities
	// that overlap none of them.
	Override Mode = "override"
	// Extend is override, except that a wider tagger entity of the same
	// type keeps the overlay entities it holds: the gazetteer knows part
	// of a longer name ("John" of "John Smith").
	Extend Mode = "extend"
)

// Modes are the modes.
var Modes = []Mode{Fill, Override, Extend}

// ParseMode parses a mode's name.
func ParseMode(s string) (Mode, error) {
	if m := Mode(s); slices.Contains(Modes, m) {
		return m, nil
	}
	return "", fmt.Errorf("unknown overlay mode %q (want fill, override or extend)", s)
}

// An Overlay finds entities in a tokenized sentence. It must be safe for
// concurrent use: a served tagger predicts for concurrent requests.
type Overlay interface {
	// Kind is the name under which the overlay's loader is registered.
	Kind() string
	// Spans returns the overlay's entities of a sentence, ordered and not
	// overlapping.
	Spans(tokens []string) []corpus.Span
	// Save writes the overlay's files into dir (a checkpoint's Dir,
	// created and empty), which its loader reads back.
	Save(dir string) error
}

// A TextOverlay finds some of its entities from the whole text a tagger
// predicts at once (a corpus split, a request's sentences), not from one
// sentence alone: a person named once with a first name is the same
// person where the text names her by her surname alone. ForText returns
// the overlay to apply to those sentences.
type TextOverlay interface {
	Overlay
	ForText(sentences [][]string) (Overlay, error)
}

// A Gate lets only some of the tagger's entities into a combination
// (Attached.Gated): Admit returns those of model, a sentence's entities of
// the tagger, that it admits beside own, the overlay's entities of the
// sentence (each list ordered and not overlapping), and own less those an
// admitted entity is known to replace (the longer name of which own holds
// a part).
type Gate interface {
	Admit(tokens []string, own, model []corpus.Span) (admitted, kept []corpus.Span)
}

// Loader reads an overlay saved in dir by its Save.
type Loader func(dir string) (Overlay, error)

var (
	mu      sync.RWMutex
	loaders = map[string]Loader{}
)

// Register declares a kind of overlay; the package that implements it
// calls it from init. A kind registered twice panics.
func Register(kind string, load Loader) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := loaders[kind]; dup {
		panic("overlay: kind " + kind + " registered twice")
	}
	loaders[kind] = load
}

// manifest is File.
type manifest struct {
	Kind string `json:"kind"`
	Mode Mode   `json:"mode"`
	// Version is the combining rules' version the overlay was saved under
	// (absent: 1). Writing it changes an overlaid checkpoint's digest when
	// the rules change, so that cached evaluations of the old rules are not
	// reused for the new; every version combines by today's rules.
	Version int `json:"version,omitempty"`
	// ModelTypes: Attached.ModelTypes (absent: every type; a pointer, so
	// that an empty list, no type, is written).
	ModelTypes *[]string `json:"model_types,omitempty"`
	// Gated: Attached.Gated.
	Gated bool `json:"gated,omitempty"`
}

// Version is the combining rules' version; 4 has mode extend beside fill
// and override (see Combine), 5 the overlays that find entities from the
// whole text predicted (TextOverlay), 6 the text's names resolved against
// the gazetteers' matches as within a sentence (the match on a tie), 7 the
// surnames of the text's names found alone too, 8 the gate (Attached.Gated),
// 9 the gate's longer names in place of the overlay's entities they hold,
// 10 the name lists' head words ending the names the overlay finds.
// Earlier versions combined
// by rules that were tried during development and are read by today's. A
// stage that writes overlays versions itself by it, so that new rules
// rerun it and the evaluations of its output.
const Version = 10

// Attached is an overlay with the mode a tagger combines it in.
type Attached struct {
	Overlay
	Mode Mode
	// ModelTypes, when not nil, are the types of the tagger's entities
	// that the combination keeps; its entities of other types are dropped,
	// where the overlay alone does better than with them (chosen on a dev
	// split: on the shipped sample the tagger's PER and ORG entities
	// spoiled more than they found).
	ModelTypes []string
	// Gated: the tagger's entities pass the overlay's Gate first (an
	// overlay that is no Gate cannot be gated): the gazetteer's overlay
	// admits only those shaped like the names its gaps hold.
	Gated bool
}

// Attach pairs an overlay with a mode, checked.
func Attach(o Overlay, mode Mode) (*Attached, error) {
	if _, err := ParseMode(string(mode)); err != nil {
		return nil, err
	}
	return &Attached{Overlay: o, Mode: mode}, nil
}

// ForText returns the attached overlay to apply to sentences, predicted
// together: its TextOverlay's for that text, or itself.
func (a *Attached) ForText(sentences [][]string) (*Attached, error) {
	t, ok := a.Overlay.(TextOverlay)
	if !ok {
		return a, nil
	}
	o, err := t.ForText(sentences)
	if err != nil {
		return nil, fmt.Errorf("overlay %s: %w", t.Kind(), err)
	}
	return &Attached{Overlay: o, Mode: a.Mode, ModelTypes: a.ModelTypes, Gated: a.Gated}, nil
}

// Write writes the overlay into the checkpoint directory dir, replacing
// the one there: what Tagger.Save writes, and what the stage that adds an
// overlay to a trained tagger writes without loading its weights.
func (a *Attached) Write(dir string) error {
	od := filepath.Join(dir, Dir)
	if err := os.RemoveAll(od); err != nil {
		return fmt.Errorf("writing overlay: %w", err)
	}
	if err := os.MkdirAll(od, 0o755); err != nil {
		return fmt.Errorf("writing overlay: %w", err)
	}
	if err := a.Save(od); err != nil {
		return fmt.Errorf("writing overlay %s: %w", a.Kind(), err)
	}
	if _, ok := a.Overlay.(Gate); a.Gated && !ok {
		return fmt.Errorf("writing overlay: a %s overlay has no gate", a.Kind())
	}
	man := manifest{Kind: a.Kind(), Mode: a.Mode, Version: Version, Gated: a.Gated}
	if a.ModelTypes != nil {
		man.ModelTypes = &a.ModelTypes
	}
	b, err := json.Marshal(man)
	if err != nil {
		return fmt.Errorf("writing overlay: %w", err)
	}
	if err := os.WriteFile(filepath.Join(od, File), b, 0o644); err != nil {
		return fmt.Errorf("writing overlay: %w", err)
	}
	return nil
}

// Read reads the overlay of the checkpoint in dir: nil without one (every
// checkpoint saved before overlays existed), an error when its kind is not
// registered in this build.
func Read(dir string) (*Attached, error) {
	od := filepath.Join(dir, Dir)
	b, err := os.ReadFile(filepath.Join(od, File))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("overlay: %w", err)
	}
	var man manifest
	if err := json.Unmarshal(b, &man); err != nil {
		return nil, fmt.Errorf("overlay: %s/%s: %w", Dir, File, err)
	}
	if _, err := ParseMode(string(man.Mode)); err != nil {
		return nil, fmt.Errorf("overlay: %s/%s: %w", Dir, File, err)
	}
	if man.Version > Version {
		return nil, fmt.Errorf("overlay: %s/%s: version %d, this build knows up to %d (saved by a newer nerflow?)", Dir, File, man.Version, Version)
	}
	mu.RLock()
	load, ok := loaders[man.Kind]
	mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("overlay: %s/%s: kind %q is not registered in this build", Dir, File, man.Kind)
	}
	o, err := load(od)
	if err != nil {
		return nil, fmt.Errorf("overlay %s: %w", man.Kind, err)
	}
	if _, ok := o.(Gate); man.Gated && !ok {
		return nil, fmt.Errorf("overlay: %s/%s: gated, but a %s overlay has no gate", Dir, File, man.Kind)
	}
	a := &Attached{Overlay: o, Mode: man.Mode, Gated: man.Gated}
	if man.ModelTypes != nil {
		a.ModelTypes = append([]string{}, *man.ModelTypes...)
	}
	return a, nil
}

// Combine combines a sentence's model entities with an overlay's (each
// list ordered and non-overlapping) in mode, and returns the combined
// entities, ordered and non-overlapping. Spans overlap when they share a
// token: a nested span overlaps the one around it, touching spans do not.
//
// Whether a gazetteer's match or the model's wider entity holding it is
// the name depends on the gazetteer: one of first names knows "John" of
// "John Smith" (extend wins on the shipped sample: dev F1 78.3 against
// 76.1), while BC5CDR's dictionaries hold chemicals and diseases with the
// boundaries its annotators drew, and a model trained on 1,100 of its
// sentences draws wider ones (override wins: 78.9 against 76.6). The
// methods try every mode and keep the one the dev split scores best.
func Combine(model, overlay []corpus.Span, mode Mode) []corpus.Span {
	kept, added := model, overlay
	switch mode {
	case Override:
		kept, added = overlay, model
	case Extend:
		kept, added = extendKept(model, overlay), model
	}
	out := slices.Clone(kept)
	for _, a := range added {
		if !slices.ContainsFunc(kept, func(k corpus.Span) bool { return overlaps(k, a) }) {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b corpus.Span) int { return cmp.Compare(a.Start, b.Start) })
	return out
}

// extendKept returns what extend keeps before adding the rest of the
// model's entities: the overlay's entities, except those held by a model
// entity of their type that is wider and crosses no other overlay entity,
// which it keeps instead.
func extendKept(model, overlay []corpus.Span) []corpus.Span {
	var wide []corpus.Span
	for _, m := range model {
		holds, crosses := false, false
		for _, o := range overlay {
			switch {
			case !overlaps(m, o):
			case m.Label == o.Label && m.Start <= o.Start && o.End <= m.End && m.End-m.Start > o.End-o.Start:
				holds = true
			default:
				crosses = true
			}
		}
		if holds && !crosses {
			wide = append(wide, m)
		}
	}
	if len(wide) == 0 {
		return overlay
	}
	kept := slices.Clone(wide)
	for _, o := range overlay {
		if !slices.ContainsFunc(wide, func(w corpus.Span) bool { return overlaps(w, o) }) {
			kept = append(kept, o)
		}
	}
	return kept
}

func overlaps(a, b corpus.Span) bool { return a.Start < b.End && b.Start < a.End }

// Weight is the share of a token's probabilities that the overlay claims
// where it changes the tagger's tag: the row becomes
// Weight·onehot(new tag) + (1-Weight)·(the tagger's row). With one half,
// dictionary and tagger weigh alike: the new tag gets at least 0.5 and
// every other tag at most half of what the tagger gave it, so the new tag
// is the row's argmax (tied only where the tagger gave it nothing and one
// other tag everything) and each row still sums to one. An added entity's
// confidence (the mean probability of its tags) is then 0.5 plus half the
// tagger's own: below the tagger's confident entities, above its doubtful
// ones, the matches the tagger half agrees with first. A fixed 1.0 would
// claim a certainty no gazetteer has, and the tagger's row unchanged
// would give the entity the low confidence of a tag the tagger rejected.
const Weight = 0.5

// Apply combines one sentence's prediction by a tagger of the tag set
// tags (class i is tags[i]) in scheme over types with the overlay's
// entities of its tokens, the tagger's of a type outside ModelTypes, and
// those the overlay's gate does not admit (Gated), left out first. Overlay entities of a type outside types cannot
// be written and are left out. A sentence whose entities do not change
// keeps its tags and probabilities as the tagger gave them.
func (a *Attached) Apply(scheme corpus.Scheme, types, tags []string, tokens []string, p dataset.Prediction) (dataset.Prediction, error) {
	var ov []corpus.Span
	for _, sp := range a.Spans(tokens) {
		if slices.Contains(types, sp.Label) {
			ov = append(ov, sp)
		}
	}
	if len(ov) == 0 && a.ModelTypes == nil && !a.Gated {
		return p, nil
	}
	model, err := scheme.Spans(p.Tags)
	if err != nil {
		return p, fmt.Errorf("overlay: decoding the tagger's tags: %w", err)
	}
	kept := model
	if a.ModelTypes != nil {
		kept = slices.DeleteFunc(slices.Clone(model), func(sp corpus.Span) bool { return !slices.Contains(a.ModelTypes, sp.Label) })
	}
	if g, ok := a.Overlay.(Gate); ok && a.Gated {
		kept, ov = g.Admit(tokens, ov, kept)
	}
	spans := Combine(kept, ov, a.Mode)
	if slices.Equal(spans, model) {
		return p, nil
	}
	// In IO two touching entities of one type are one: the scheme cannot
	// write them apart, as the distant labels in IO could not.
	combined, err := scheme.Tags(spans, len(p.Tags), corpus.MergeAdjacent())
	if err != nil {
		return p, fmt.Errorf("overlay: %w", err) // not reached: Combine keeps spans apart
	}
	out := dataset.Prediction{Tags: combined, Probs: p.Probs}
	cloned := false
	for t, tag := range combined {
		if tag == p.Tags[t] || t >= len(p.Probs) {
			continue
		}
		k := slices.Index(tags, tag)
		if k < 0 {
			return p, fmt.Errorf("overlay: tag %s of token %d is not in the tag set %v", tag, t+1, tags) // not reached: types filtered above
		}
		if len(p.Probs[t]) != len(tags) {
			return p, fmt.Errorf("overlay: token %d has %d probabilities for %d tags", t+1, len(p.Probs[t]), len(tags))
		}
		if !cloned {
			out.Probs, cloned = slices.Clone(p.Probs), true // rows are replaced, never written in place
		}
		row := make([]float32, len(tags))
		for j, v := range p.Probs[t] {
			row[j] = (1 - Weight) * v
		}
		row[k] += Weight
		out.Probs[t] = row
	}
	return out, nil
}
