package distant

import (
	"fmt"
	"strconv"

	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/train/overlay"
)

// StageFirstWords attaches the FirstWords gate to a trained tagger.
const StageFirstWords = "distant.firstwords"

func init() {
	stages.Register(stages.Stage{
		Name:    StageFirstWords,
		Version: 2, // 2: a text whose names are not capitalized gets the checkpoint as it came, not an empty gate
		Doc: "Attaches to a trained tagger the gate of a sentence's first word: wherever the tagger predicts, an entity of " +
			"it that begins with the sentence's first word loses that word, and is dropped where it was that word alone, when " +
			"the training text writes the word in lower case more often than capitalized inside a sentence (\"Dealers said\": " +
			"a first word is capitalized by rule, and a tagger that learned capitalized words as names tags it). Nothing " +
			"changes where the text does not write its names capitalized (its tagged entities, beside a sentence's first word, " +
			"mostly begin in lower case): the checkpoint comes back as it was, with its digest.",
		Params: append([]stages.Param{
			stages.IntParam("min_lower", 2, "a word is common where its lower-case form occurs at least this often in the text (and more often than its capitalized forms inside a sentence)", stages.AtLeast(1)),
			minCapitalShareParam(),
		}, dataset.SourceParams("text", "the tagger's training text, with its (distant) tags")...),
		Inputs: []stages.Port{
			{Name: "model", Kind: "checkpoint", Doc: "a trained tagger (tagger.json), without an overlay"},
			{Name: "text", Kind: "corpus", Doc: "the tagger's training text: its words' cases say which first words are common; its tags whether it writes names capitalized"},
		},
		Outputs: []stages.Port{
			{Name: "model", Kind: "checkpoint", Doc: "the input checkpoint's files and metadata with " + overlay.Dir + "/ holding the gate (without, for a text whose names are not capitalized)"},
		},
		Run: runFirstWordsStage,
	})
}

func runFirstWordsStage(c *stages.Context) error {
	p := c.Params
	model := c.Input("model")
	if _, ok := model.File(taggerFile); !ok {
		return stages.Permanent(fmt.Errorf("input model %s: no %s: the gate goes with a tagger", model.Prefix, taggerFile))
	}
	if _, ok := model.File(overlay.Dir + "/" + overlay.File); ok {
		return stages.Permanent(fmt.Errorf("input model %s has an overlay already: a checkpoint holds one", model.Prefix))
	}
	text, err := dataset.ReadInput(c.Input("text"), p, "text")
	if err != nil {
		return err
	}
	_, share, err := givenSpans(text)
	if err != nil {
		return stages.Permanent(fmt.Errorf("input text: %w", err))
	}
	if min := p.Float("min_capital_share"); !share.reaches(min) {
		// The checkpoint as it came, with its digest: the evaluation of
		// the model alone is then this one's too, from the cache, where
		// an empty gate would have been scored once more for the same F1.
		c.Log.Info("no first-word gate: the text does not write its entities capitalized",
			"capital", share.Capital, "entities", share.Entities, "min_capital_share", min)
		return writeAttached(c, model, nil, nil)
	}
	fw := NewFirstWords(text, p.Int("min_lower"))
	c.Log.Info("first-word gate", "common_first_words", fw.Len(), "sentences", len(text.Sentences))
	a, err := overlay.Attach(fw, overlay.Fill)
	if err != nil {
		return stages.Permanent(err)
	}
	a.Gated = true
	return writeAttached(c, model, a, map[string]string{"gated": "first-words", "first_words": strconv.Itoa(fw.Len())})
}
