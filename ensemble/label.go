package ensemble

import (
	"fmt"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/stages"
)

// StageLabel writes the ensemble's hard labels of a corpus.
const StageLabel = "ensemble.label"

func init() {
	stages.Register(stages.Stage{
		Name:    StageLabel,
		Version: 1,
		Doc: "Labels a corpus with the most probable tag of every token under averaged predictions (" + StageAverage +
			"): the ensemble's labels, the hard training set of a student of another kind than a soft-target " +
			"tagger (a CRF, which KL to per-token distributions cannot train).",
		Params: dataset.SourceParams("corpus", "the sentences the predictions are of"),
		Inputs: []stages.Port{
			{Name: "predictions", Kind: "predictions", Doc: dataset.PredictionsFile + " of the corpus, e.g. the averaged predictions"},
			{Name: "corpus", Kind: "corpus", Doc: "the sentences, in the predictions' order (tags, if any, are replaced)"},
		},
		Outputs: []stages.Port{
			{Name: "labeled", Kind: "corpus", Doc: "labeled.conll: the corpus with the predictions' tags"},
		},
		Run: runLabel,
	})
}

func runLabel(c *stages.Context) error {
	preds, err := dataset.ReadPredictionsInput(c.Input("predictions"), "predictions")
	if err != nil {
		return err
	}
	text, err := dataset.ReadInput(c.Input("corpus"), c.Params, "corpus")
	if err != nil {
		return err
	}
	labeled, err := Label(text, preds)
	if err != nil {
		return stages.Permanent(err)
	}
	scheme, err := corpus.ParseScheme(preds.Scheme)
	if err != nil {
		return stages.Permanent(fmt.Errorf("predictions: %w", err))
	}
	out := c.Output("labeled")
	dataset.Describe(out, corpus.FormatCoNLL, scheme)
	w, err := out.Create("labeled.conll")
	if err != nil {
		return err
	}
	if err := corpus.Write(w, labeled, corpus.FormatCoNLL); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

// Label returns a copy of c with each sentence's tags replaced by the
// predictions' best tags, which must be of the same sentences.
func Label(c *corpus.Corpus, p *dataset.Predictions) (*corpus.Corpus, error) {
	if len(p.Sentences) != len(c.Sentences) {
		return nil, fmt.Errorf("%d predictions for %d sentences: not predictions of this corpus", len(p.Sentences), len(c.Sentences))
	}
	out := &corpus.Corpus{Sentences: make([]corpus.Sentence, len(c.Sentences))}
	for i, s := range c.Sentences {
		tags := p.Sentences[i].Tags
		if len(tags) != len(s.Tokens) {
			return nil, fmt.Errorf("sentence %d: %d tokens but %d predicted tags: not predictions of this corpus", i+1, len(s.Tokens), len(tags))
		}
		out.Sentences[i] = corpus.Sentence{Tokens: s.Tokens, Tags: tags, DocStart: s.DocStart}
	}
	return out, nil
}
