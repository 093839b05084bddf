package tagger

import (
	"fmt"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/train/overlay"
)

// SetOverlay attaches an overlay to the tagger (see package overlay): its
// predictions combine the overlay's entities with its own in mode, and
// Save writes the overlay into the checkpoint. A nil overlay detaches it.
func (m *Tagger) SetOverlay(o overlay.Overlay, mode overlay.Mode) error {
	if o == nil {
		m.overlay = nil
		return nil
	}
	a, err := overlay.Attach(o, mode)
	if err != nil {
		return err
	}
	m.overlay = a
	return nil
}

// OverlayMode returns the mode of the tagger's overlay, "" without one.
func (m *Tagger) OverlayMode() overlay.Mode {
	if m.overlay == nil {
		return ""
	}
	return m.overlay.Mode
}

// applyOverlay combines every prediction of c with the tagger's overlay,
// if it has one.
func (m *Tagger) applyOverlay(c *corpus.Corpus, preds []Prediction) error {
	if m.overlay == nil {
		return nil
	}
	a, err := m.overlay.ForText(c.Tokens())
	if err != nil {
		return err
	}
	for i := range preds {
		p, err := a.Apply(m.Labels.Scheme, m.Labels.Types, m.Labels.Tags, c.Sentences[i].Tokens, preds[i])
		if err != nil {
			return fmt.Errorf("sentence %d: %w", i+1, err)
		}
		preds[i] = p
	}
	return nil
}
