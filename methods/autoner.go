package methods

import (
	"fmt"
	"slices"

	"github.com/nerflow/nerflow/distant"
	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/train/tagger"
)

// The variants of method autoner.
const (
	// variantFuzzy is AutoNER's Fuzzy-LSTM-CRF baseline: the partial-label
	// CRF (loss partial) on the gazetteers' tags, where a phrase of unknown
	// type allows any entity tag and an unmatched token is O unless
	// miss_rate says otherwise.
	variantFuzzy = "fuzzy"
	// variantTieBreak is AutoNER's Tie-or-Break model (head and loss
	// tiebreak) on the same tags: gaps next to a "?" phrase are unknown
	// and left out of its loss.
	variantTieBreak = "tiebreak"
)

// AutoNER is AutoNER (Shang et al., 2018) on gazetteers: typed phrases
// (dict_core) and untyped high-quality phrases (dict_full, entities of
// unknown type "?") label raw text, and taggers learn from the labels while
// treating what the labels cannot say as unknown. A train input that
// carries distant tags already (as CoNLL-2003's does) stands in for the
// gazetteers: its tagged phrases are the phrases, none of unknown type.
// Every variant is scored on the dev and test sets given, beside the
// gazetteers' own labels of those sets, and registered as NAME-VARIANT;
// of the variants' final models, the dev input keeps one per seed as the
// run's, registered as NAME (select: which variant suits a corpus is what
// its dev split says).
//
//	label ------------> fuzzy, tiebreak (x seeds x miss rates) -> eval-V -> select-V -> test-V -> register-V
//	                                                     overlay-V (each variant's final) -> select -> test -> register
//	tiebreak-labels (the Tie-or-Break labels of the train input and their report)
//	vectors (with a vectors input) --^
//
// By default each variant trains at two miss rates, AutoNER's 0 (an
// unmatched token is O) and 0.5 (it may be an entity), and keeps per seed
// the one the dev input scores best: 0.5 suits labels that miss entities
// but rarely tag a wrong one (CoNLL-2003's), 0 labels of low precision,
// and the dev split tells them apart (docs/autoner.md).
//
// Variant fuzzy is the Fuzzy-LSTM-CRF, variant tiebreak the Tie-or-Break
// model. Both learn from the BIO tags of node label; the Tie-or-Break head
// reads its gap and span labels from them by the rules of stage
// distant.tiebreak, whose node tiebreak-labels writes those labels out and
// counts the ties, breaks and unknown gaps the phrases give.
func init() {
	spec.RegisterMethod(spec.Method{
		Name: "autoner",
		Doc: "AutoNER on typed gazetteers and untyped high-quality phrases (unknown type \"?\"): the Tie-or-Break " +
			"labels of the train input (stage " + distant.StageTieBreak + ": adjacent tokens tied in one phrase, " +
			"broken apart, or unknown next to an untyped phrase) and the Fuzzy-LSTM-CRF baseline (variant fuzzy: a " +
			"partial-label CRF where an untyped phrase may take any entity tag) and the Tie-or-Break model (variant " +
			"tiebreak: a tie/break classifier between adjacent tokens, unknown gaps left out, and a type classifier " +
			"over the spans between breaks with a None class), each at the miss rates listed (by default AutoNER's 0 and 0.5, " +
			"the dev input keeping the better per variant and seed, node select-VARIANT), each tagger scored on the dev and " +
			"test sets beside the gazetteers' own labels of them and registered as NAME-VARIANT; with a dev input and both " +
			"variants, of their final models the one the dev input scores best (per seed, Tie-or-Break on a tie) is the " +
			"run's (node select), tested and registered as NAME. Without gazetteers " +
			"the train input's distant tags are the phrases (no tiebreak-labels node)." + overlayDoc,
		Params: append([]stages.Param{
			stages.StringListParam("variants", []string{variantFuzzy, variantTieBreak}, "the taggers trained, one each (and per seed), each registered as NAME-VARIANT; with a dev input and several, the one dev scores best is the run's (node select, registered as NAME)",
				stages.OneOf(variantFuzzy, variantTieBreak)),
			stages.IntListParam("seeds", []int{1}, "seeds; several train one tagger per seed and variant (fan-out), each scored and registered", stages.AtLeast(0)),
			tagger.SchemeParam("bio", "tag scheme of the labels and the taggers"),
			stages.IntParam("epochs", 8, "training epochs, raised to reach min_steps; the best epoch on the dev input is kept (8: on BC5CDR Tie-or-Break was still rising after 4, and 8 scored 1.1 higher over three seeds, docs/autoner.md)", stages.Range(1, 1000)),
			minStepsParam("each tagger"),
			wordDropoutParam("each tagger", wordDropout),
			stages.FloatListParam("miss_rate", []float64{0, 0.5}, "both variants: the chance that the labels left an entity token O (0: AutoNER's setting, where an unmatched token is O: the Fuzzy-LSTM-CRF, and Tie-or-Break's None spans and breaks; above 0 an unmatched token may be an entity at those odds, for labels of low recall); several: candidates, one tagger each per variant and seed, of which the dev input keeps the best (node select-VARIANT), for labels whose recall and precision nobody has measured", stages.Range(0, 1)),
			tagger.Param("type_miss_rates"),
			tagger.Param("mistype_rates"),
		}, append(fileParams(), distantParams(refineAuto, capitalizedAuto)...)...),
		Inputs: distantInputs(),
		Build:  buildAutoNER,
	})
}

func buildAutoNER(b *spec.Builder) error {
	checkFiles(b)
	p := b.Params()
	variants := slices.Compact(slices.Clone(p.Strings("variants")))
	if len(variants) == 0 {
		b.Errorf("params.variants", "want at least one of %s, %s", variantFuzzy, variantTieBreak)
	}
	seeds := p.Ints("seeds")
	if len(seeds) == 0 {
		b.Errorf("params.seeds", "want at least one seed")
	}
	vec := vectors(b)
	corpus := trainingCorpus(b)
	// Without gazetteers the train input's own distant tags (CoNLL-2003's,
	// say) are the phrases. Both variants read their labels from BIO tags,
	// so they train as they are; only the .ck file of the gazetteers'
	// matches, with its unknown gaps next to untyped phrases, has no source.
	if b.Has("gazetteers") {
		b.Node("tiebreak-labels", distant.StageTieBreak).Pass("case", "abbreviations").
			Input("corpus", b.In("train")).Input("gazetteers", gazetteersFor(b)...).Input("stopwords", b.In("stopwords"))
	}

	rates := candidateMissRates(b)
	if len(rates) == 0 {
		return nil
	}
	fan := func(n *spec.NodeBuilder) *spec.NodeBuilder { return fanSeeds(n, seeds, false) }
	finals := make([]finalModel, 0, len(variants))
	for _, v := range variants {
		t := fanSeeds(b.Node(v, tagger.StageTrain), seeds, true).Pass("scheme", "epochs", "min_steps", "word_dropout").Input("embeddings", vec)
		switch v {
		case variantFuzzy:
			partialOnLabels(t)
		case variantTieBreak:
			t.Set("head", tagger.TieBreakHead).Set("loss", tagger.LossTieBreak).Pass("type_miss_rates", "mistype_rates")
		}
		corpus(t)
		readSplit(b, t, "dev", "dev")
		// The method's miss_rate lists candidates: one is the tagger's
		// own, several fan it out (either replaces the list that
		// partialOnLabels passed).
		finals = append(finals, end(b, finalModel{step: bestMissRate(b, t, rates, seeds), fan: fan, name: fmt.Sprintf("%s-%s", b.Name(), v)}, "-"+v))
	}
	bestVariant(b, variants, finals, fan)
	return nil
}
