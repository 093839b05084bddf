package distant

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/eval"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/train/overlay"
)

// StageOverlay is the stage that adds the gazetteer's overlay to a trained
// tagger.
const StageOverlay = "distant.overlay"

// taggerFile is the file that makes a checkpoint a tagger (package
// train/tagger's TaggerFile, which this package cannot import: the tagger
// imports it). Only a tagger combines an overlay with its entities.
const taggerFile = "tagger.json"

func init() {
	stages.Register(stages.Stage{
		Name: StageOverlay,
		// The combining rules' version: overlays saved under new rules get
		// new digests, so that no cached evaluation of the old is reused.
		Version: overlay.Version,
		Doc: "Adds a gazetteer overlay to a trained tagger: the checkpoint, unchanged, with a directory " +
			overlay.Dir + "/ holding gazetteer entries and the matching options of " + StageName + ", so that " +
			"wherever the tagger predicts (train.evaluate, train.predict, predict.entities, nerflow serve) its " +
			"entities are combined with the typed matches of the same sentence: mode fill keeps the tagger's " +
			"entities and adds the matches that overlap none of them, mode override keeps the matches and adds " +
			"the tagger's entities that overlap none, mode extend does as override but for the matches held by a wider " +
			"entity of the tagger of their type (the longer name of which the gazetteer knows a part), which it keeps instead. The entries are the gazetteers' or, without gazetteers, " +
			"mined from the distantly labeled corpus (each distinct tagged phrase with its most frequent type). With " +
			"name lists (input names), the overlay also finds person names in each sentence as " + StageNames + " does, " +
			"the common words of input names_corpus (the training text) telling a first name from a word.",
		Params: append([]stages.Param{
			stages.StringParam("mode", string(overlay.Fill), "fill: the tagger's entities are kept and the matches that overlap none added; override: the matches are kept and the tagger's entities that overlap none added; extend: as override, but a wider entity of the tagger of a match's type keeps the matches it holds", stages.OneOf(string(overlay.Fill), string(overlay.Override), string(overlay.Extend))),
			stages.BoolParam("capitalized", false, "with input names: the tagger's entities are kept only where each is exactly a capitalized phrase of its sentence between the overlay's entities (found as "+StageName+"'s capitalized finds them, with the name lists' titles and common words and the common words of names_corpus and of the text tagged) or holds a word that is not capitalized: for a tagger trained on capitalized phrases, which also tags parts of longer names, days and common words"),
			stages.IntParam("names_min_common", 2, "with input names: a word whose lower-case form occurs this often in names_corpus is a common word (a first name that is one starts no name, its capitalized form ends one), as min_common of "+StageNames, stages.AtLeast(1)),
		}, append(append(matchParams("matches of phrases with tied types add no entity; unknown (\"?\") or o as in "+StageName+" (either way they keep shorter matches out)"),
			dataset.SourceParams("labeled", "distantly labeled sentences to mine the entries from")...),
			dataset.SourceParams("names_corpus", "the text whose common words the name finder knows")...)...),
		Inputs: []stages.Port{
			{Name: "model", Kind: "checkpoint", Doc: "a trained tagger (tagger.json)"},
			{Name: "gazetteers", Kind: "gazetteer", Many: true, Optional: true, Doc: "the phrase lists that labeled the tagger's training corpus; every file of every artifact is a gazetteer"},
			{Name: "stopwords", Kind: "stopwords", Optional: true, Doc: "one word per line; phrases made only of them are not matched"},
			{Name: "labeled", Kind: "corpus", Optional: true, Doc: "without gazetteers: the training corpus with its distant tags, whose tagged phrases are the entries"},
			{Name: "names", Kind: "names", Many: true, Optional: true, Doc: "lists of first names and titles (as " + StageNames + " reads them): person names found in each sentence join the gazetteers' matches"},
			{Name: "names_corpus", Kind: "corpus", Optional: true, Doc: "with names: the tagger's training text, whose common lower-case words start no name (Will, May); required with names"},
			{Name: "dev_report", Kind: "report", Optional: true, Doc: "the evaluation (train.evaluate, with its baseline) on a dev split of the same tagger under the same overlay in the same mode, every type kept: the tagger's entities are then kept only for the types whose F1 there is at least the distant labels' (where they add more than they spoil); a type the labels never find is kept"},
		},
		Outputs: []stages.Port{
			{Name: "model", Kind: "checkpoint", Doc: "the input checkpoint's files and metadata with " + overlay.Dir + "/"},
		},
		Run: runOverlayStage,
	})
}

func runOverlayStage(c *stages.Context) error {
	p := c.Params
	mode, err := overlay.ParseMode(p.String("mode"))
	if err != nil {
		return stages.Permanent(err)
	}
	model := c.Input("model")
	if _, ok := model.File(taggerFile); !ok {
		return stages.Permanent(fmt.Errorf("input model %s: no %s: an overlay goes with a tagger", model.Prefix, taggerFile))
	}
	opts, err := stageOptions(c)
	if err != nil {
		return err
	}
	var gazetteers []*Gazetteer
	switch labeled := c.Input("labeled"); {
	case len(c.Inputs("gazetteers")) > 0:
		if gazetteers, err = readGazetteers(c.Inputs("gazetteers"), p.Ints("priorities"), p.Strings("types"), opts...); err != nil {
			return err
		}
	case labeled != nil:
		text, err := dataset.ReadInput(labeled, p, "labeled")
		if err != nil {
			return err
		}
		g, err := MineEntries(text, "labeled")
		if err != nil {
			return stages.Permanent(fmt.Errorf("input labeled: %w", err))
		}
		gazetteers = []*Gazetteer{g}
	default:
		return stages.Permanent(fmt.Errorf("connect gazetteers, or the distantly labeled corpus (input labeled) to mine the entries from"))
	}
	ov, err := NewOverlay(gazetteers, opts...)
	if err != nil {
		return stages.Permanent(err)
	}
	if len(c.Inputs("names")) > 0 {
		if err := addNames(c, ov, gazetteers); err != nil {
			return err
		}
	}
	st := ov.Stats()
	c.Log.Info("gazetteer overlay", "mode", mode, "entries", st.Entries, "phrases", st.Phrases, "types", ov.Types())
	if len(ov.Types()) == 0 {
		c.Log.Warn("the overlay has no typed phrase: it adds no entity")
	}

	a, err := overlay.Attach(ov, mode)
	if err != nil {
		return stages.Permanent(err)
	}
	meta := map[string]string{"overlay": string(mode)}
	if p.Bool("capitalized") {
		if len(c.Inputs("names")) == 0 {
			return stages.Permanent(fmt.Errorf("capitalized needs input names: their titles and common words are no phrase"))
		}
		a.Gated = true
		meta["gated"] = "capitalized"
	}
	if in := c.Input("dev_report"); in != nil {
		kept, dropped, err := typesThatGain(in)
		if err != nil {
			return err
		}
		a.ModelTypes = kept
		meta["model_types"] = strings.Join(kept, ",")
		c.Log.Info("the tagger's entities kept by type, on the dev split's evidence", "kept", kept, "dropped", dropped)
	}
	return writeAttached(c, model, a, meta)
}

// writeAttached writes input model's checkpoint with the overlay a to
// output model: its files and metadata as they were, overlay.Dir added
// (none for a nil a: the same files, so the same digest), and meta set.
func writeAttached(c *stages.Context, model *stages.Input, a *overlay.Attached, meta map[string]string) error {
	dir := filepath.Join(c.WorkDir(), "model")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := model.Fetch(dir); err != nil {
		return fmt.Errorf("fetching model %s: %w", model.Prefix, err)
	}
	if a != nil {
		if err := a.Write(dir); err != nil {
			return err
		}
	}
	out := c.Output("model")
	for k, v := range model.Meta {
		out.SetMeta(k, v)
	}
	for k, v := range meta {
		out.SetMeta(k, v)
	}
	if model.SchemaVersion != 0 {
		out.SetSchemaVersion(model.SchemaVersion)
	}
	return out.AddDir(dir)
}

// addNames gives the overlay the name lists of input names, with the
// common words of input names_corpus.
func addNames(c *stages.Context, ov *GazetteerOverlay, gazetteers []*Gazetteer) error {
	lists, err := readNameListInputs(c)
	if err != nil {
		return err
	}
	if c.Input("names_corpus") == nil {
		return stages.Permanent(fmt.Errorf("input names needs input names_corpus, the training text whose common words start no name"))
	}
	text, err := dataset.ReadInput(c.Input("names_corpus"), c.Params, "names_corpus")
	if err != nil {
		return err
	}
	excluded := lists.DropTypedOtherwise(gazetteers)
	common := CommonWords(text, c.Params.Int("names_min_common"))
	ov.WithNames(lists, common, c.Params.Int("names_min_common"))
	c.Log.Info("overlay finds person names", "first_names", len(lists.First), "titles", len(lists.Titles),
		"common_words", len(common), "first_names_typed_otherwise", len(excluded))
	return nil
}

// typesThatGain reads an evaluation report with its baseline (the distant
// labels' score on the same sentences) and returns the types whose F1 the
// model reaches at least the labels' with (kept, sorted; a type the labels
// never find among them) and the others (dropped). With the overlay in
// override, a type's F1 differs from the labels' only by the tagger's
// entities of that type that overlap no match: the report says, type by
// type, whether those find more than they spoil.
func typesThatGain(in *stages.Input) (kept, dropped []string, err error) {
	var rep struct {
		eval.Report
		Baseline *eval.Report `json:"baseline"`
	}
	if err := in.ReadJSON("report.json", &rep); err != nil {
		return nil, nil, fmt.Errorf("input dev_report: %w", err)
	}
	if rep.Baseline == nil {
		return nil, nil, stages.Permanent(fmt.Errorf("input dev_report %s has no baseline: connect the distant labels' report to the evaluation's input baseline", in.Digest))
	}
	kept = []string{} // not nil: no type kept is a choice too
	for _, t := range rep.TypeNames() {
		if base, ok := rep.Baseline.Types[t]; ok && rep.Types[t].F1 < base.F1 {
			dropped = append(dropped, t)
		} else {
			kept = append(kept, t)
		}
	}
	return kept, dropped, nil
}
