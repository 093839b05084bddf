package methods

import (
	"fmt"
	"slices"

	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/train/tagger"
)

// The variants of RoSTER's noise-robust training the distant method
// compares.
const (
	variantCE        = "ce"          // cross entropy
	variantGCE       = "gce"         // generalized cross entropy
	variantGCERemove = "gce-removal" // GCE with noisy-label removal
	variantPartial   = "partial"     // the partial-label CRF (loss partial)
)

// Distant is the ablation of RoSTER's noise-robust training on distant
// labels: one tagger per variant (and seed), each scored and registered,
// and of those the one the dev input scores best registered as the run's.
//
//	[label (with gazetteers)] -> ce, gce, gce-removal (x seeds) -> eval-V, test-V -> register-V
//	                                          (each variant's final) -> select -> test -> register
//	vectors (with a vectors input) --^
func init() {
	spec.RegisterMethod(spec.Method{
		Name: "distant",
		Doc: "Trains taggers with RoSTER's token head on distant labels (given, or made from gazetteers) with " +
			"cross entropy, generalized cross entropy, and GCE with noisy-label removal, O tokens partly " +
			"dropped from the loss, or a partial-label CRF (variant partial); scores each on the dev and test sets given, beside the " +
			"distant labels of those sets, and registers it as NAME-VARIANT; with a dev input and several variants, the one the " +
			"dev input scores best (per seed, a later variant on a tie) is the run's (node select), tested and registered as NAME." + overlayDoc,
		Params: append([]stages.Param{
			stages.StringListParam("variants", []string{variantCE, variantGCE, variantGCERemove}, "the losses compared, one tagger each (and per seed), each registered as NAME-VARIANT; with a dev input and several, the one dev scores best is the run's (node select, registered as NAME)",
				stages.OneOf(variantCE, variantGCE, variantGCERemove, variantPartial)),
			stages.IntListParam("seeds", []int{1}, "seeds; several train one tagger per seed and variant (fan-out), each scored and registered", stages.AtLeast(0)),
			tagger.SchemeParam("io", "tag scheme of the labels and the taggers"),
			stages.IntParam("epochs", 6, "training epochs, raised to reach min_steps", stages.Range(1, 1000)),
			minStepsParam("each tagger"),
			wordDropoutParam("each tagger", 0),
			stages.FloatParam("drop_o", 0.5, "fraction of the distant O tokens left out of the loss", stages.Range(0, 0.99)),
			tagger.Param("q"),
			tagger.Param("tau"),
			stages.IntParam("update_interval", 200, "batches between noisy-label removals", stages.AtLeast(1)),
			stages.FloatParam("miss_rate", tagger.Param("miss_rate").Default.(float64), "variant partial: the chance that the distant labels left an entity token O (1 - their recall)", stages.Range(0, 1)),
			tagger.Param("type_miss_rates"),
			tagger.Param("mistype_rates"),
		}, append(fileParams(), distantParams(refineOff, capitalizedFalse)...)...),
		Inputs: distantInputs(),
		Build:  buildDistant,
	})
}

func buildDistant(b *spec.Builder) error {
	checkFiles(b)
	p := b.Params()
	variants := p.Strings("variants")
	if len(variants) == 0 {
		b.Errorf("params.variants", "want at least one of %s, %s, %s, %s", variantCE, variantGCE, variantGCERemove, variantPartial)
	}
	seeds := p.Ints("seeds")
	if len(seeds) == 0 {
		b.Errorf("params.seeds", "want at least one seed")
	}
	vec := vectors(b)
	corpus := trainingCorpus(b)
	fan := func(n *spec.NodeBuilder) *spec.NodeBuilder { return fanSeeds(n, seeds, false) }
	variants = slices.Compact(slices.Clone(variants))
	finals := make([]finalModel, 0, len(variants))
	for _, v := range variants {
		t := fanSeeds(b.Node(v, tagger.StageTrain), seeds, true).
			Set("head", tagger.TokenHead).Pass("scheme", "epochs", "min_steps", "word_dropout").Input("embeddings", vec)
		if v != variantPartial {
			t.Pass("drop_o")
		}
		switch v {
		case variantPartial:
			partialOnLabels(t)
		case variantCE:
			t.Set("loss", tagger.LossCE)
		case variantGCE:
			t.Set("loss", tagger.LossGCE).Pass("q")
		case variantGCERemove:
			t.Set("loss", tagger.LossGCE).Pass("q", "tau", "update_interval")
		}
		corpus(t)
		readSplit(b, t, "dev", "dev")
		finals = append(finals, finishVariant(b, finalModel{step: t, fan: fan, name: fmt.Sprintf("%s-%s", b.Name(), v)}))
	}
	bestVariant(b, variants, finals, fan)
	return nil
}
