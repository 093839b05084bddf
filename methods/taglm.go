package methods

import (
	"fmt"
	"path"
	"slices"

	"github.com/nerflow/nerflow/augment"
	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/subset"
	"github.com/nerflow/nerflow/train/lm"
	"github.com/nerflow/nerflow/train/tagger"
)

// TagLM (Peters et al., 2017): forward and backward LSTM language models
// pretrained on unlabeled text and frozen, whose top states join a 2-layer
// BiLSTM-CRF tagger. One tagger per variant, which says where the states
// go: layer1 (after the first BiLSTM layer, the paper's choice), input
// (with the word representation) or none (the supervised-only baseline on
// the same labeled sentences); each scored and registered as NAME-VARIANT,
// and of several the one the dev input scores best as NAME.
//
//	[split (labeled < 1)] -> lm (augment.lm: labeled text + unlabeled) -> tagger-V -> eval-tagger-V, test-tagger-V -> register-tagger-V
//	                                                                      tagger-V (each) -> select -> test -> register
//	vectors (with a vectors input) ------------------------------------------^
func init() {
	lmc, lmr := lm.DefaultConfig(), lm.DefaultTrainConfig()
	spec.RegisterMethod(spec.Method{
		Name: "taglm",
		Doc: "TagLM: language models pretrained on unlabeled text, frozen, their states concatenated with the output of " +
			"the first layer of a 2-layer BiLSTM-CRF tagger; ablations without them (the supervised-only baseline) and " +
			"with them at the input. With labeled < 1 the train input is first split (subset.split): that fraction of " +
			"its sentences stays labeled, a disjoint fraction becomes the unlabeled text (VSL's 10%/50%). Each variant's tagger " +
			"is registered as NAME-VARIANT; with a dev input and several variants, the one the dev input scores best (a later " +
			"variant on a tie) is the run's (node select), tested and registered as NAME.",
		Params: append([]stages.Param{
			stages.StringListParam("variants", []string{tagger.LMLayer1}, "where the language models' states join the tagger, one tagger each: layer1, input, none (no language model); with a dev input and several, the one dev scores best is the run's (node select, registered as NAME)",
				stages.OneOf(tagger.LMPlacements()...)),
			stages.FloatParam("labeled", 1, "fraction of the train input's sentences kept labeled (below 1: split by subset.split)", stages.Range(0, 1)),
			stages.FloatParam("unlabeled", 0.5, "with labeled < 1: fraction of the train input's sentences, disjoint from the labeled ones, given to the language models as text", stages.Range(0, 1)),
			stages.BoolParam("unlabeled_rest", false, "with labeled < 1: every sentence not kept labeled is text (overrides unlabeled)"),
			stages.IntParam("split_seed", 1, "seed of the split's sample", stages.AtLeast(0)),
			stages.StringParam("unlabeled_files", "*", "base-name pattern of the files of the unlabeled input the language models read"),
			stages.StringParam("unlabeled_format", "text", "format of the unlabeled files: brown (word/TAG) or a corpus format"),
			stages.IntParam("lm_dim", lmc.Dim, "language models: word vector size", stages.Range(1, 4096)),
			stages.IntParam("lm_hidden", 128, "language models: LSTM units per direction (a tagger reads twice as many)", stages.Range(1, 8192)),
			stages.IntParam("lm_layers", lmc.Layers, "language models: LSTM layers per direction (the tagger reads the top one)", stages.Range(1, 8)),
			stages.IntParam("lm_max_words", 10000, "language models: vocabulary size", stages.Range(10, 1000000)),
			stages.IntParam("lm_epochs", lmr.Epochs, "language models: training epochs", stages.Range(1, 1000)),
			tagger.SchemeParam("bio", "tag scheme the taggers predict"),
			stages.IntParam("layers", 2, "BiLSTM layers of the taggers (layer1 needs 2 or more)", stages.Range(1, 8)),
			stages.IntParam("epochs", 15, "training epochs of the taggers", stages.Range(1, 1000)),
			stages.IntParam("patience", 4, "stop after this many epochs without a better dev F1 (0: never)", stages.AtLeast(0)),
			stages.IntParam("seed", 1, "seed of the language models and the taggers", stages.AtLeast(0)),
		}, append(fileParams(), encoderParams()...)...),
		Inputs: append(corpusInputs("sentences with gold tags: all of them labeled, or (labeled < 1) the corpus to split"),
			stages.Port{Name: "unlabeled", Kind: "text", Many: true, Optional: true,
				Doc: "text for the language models, beside the labeled sentences' (and the split's unlabeled part): files matching unlabeled_files"},
			encoderInput()),
		Build: buildTagLM,
	})
}

func buildTagLM(b *spec.Builder) error {
	checkFiles(b)
	checkEncoder(b)
	p := b.Params()
	variants := slices.Compact(p.Strings("variants"))
	if len(variants) == 0 {
		b.Errorf("params.variants", "want at least one of %v", tagger.LMPlacements())
	}
	if slices.Contains(variants, tagger.LMLayer1) && p.Int("layers") < 2 {
		b.Errorf("params.layers", "variant %s feeds the language models' states to the second BiLSTM layer: want layers >= 2", tagger.LMLayer1)
	}

	// The labeled sentences, and the text of the language models.
	labeled := func(n *spec.NodeBuilder) { readSplit(b, n, "train", "corpus") }
	var text []spec.Ref
	if p.Float("labeled") < 1 {
		split := readSplit(b, b.Node("split", subset.StageSplit), "train", "corpus").
			Pass("labeled", "unlabeled", "unlabeled_rest").PassAs("seed", "split_seed")
		labeled = func(n *spec.NodeBuilder) { n.Input("corpus", split.Out("labeled")) }
		text = append(text, split.Out("unlabeled"))
	} else {
		for _, f := range []string{"unlabeled", "unlabeled_rest", "split_seed"} {
			if b.IsSet(f) {
				b.Errorf("params."+f, "only matters with labeled < 1 (a split of the train input)")
			}
		}
	}
	if b.Has("unlabeled") {
		// One pattern and format read every unlabeled artifact: the split's
		// text must pass them too.
		if ok, _ := path.Match(p.String("unlabeled_files"), subset.UnlabeledFile); len(text) > 0 && (!ok || p.String("unlabeled_format") != "text") {
			b.Errorf("params.unlabeled_files", "with a split, the language models read the split's %s and the unlabeled input alike: want a pattern that matches it and unlabeled_format text", subset.UnlabeledFile)
		}
		text = append(text, b.In("unlabeled"))
	}
	var models spec.Ref
	if slices.ContainsFunc(variants, func(v string) bool { return v != tagger.LMNone }) {
		if len(text) == 0 {
			b.Errorf("inputs", "the language models need unlabeled text: connect the input unlabeled, or split the train input (labeled < 1)")
		}
		n := b.Node("lm", augment.StageLM).Queue("gpu").Pass("unlabeled_files", "unlabeled_format", "seed").
			PassAs("dim", "lm_dim").PassAs("hidden", "lm_hidden").PassAs("layers", "lm_layers").
			PassAs("max_words", "lm_max_words").PassAs("epochs", "lm_epochs").
			Input("unlabeled", text...)
		labeled(n) // its tokens only
		models = n.Out("lm")
	}

	vec := vectors(b)
	finals := make([]finalModel, 0, len(variants))
	for _, v := range variants {
		t := b.Node("tagger-"+v, tagger.StageTrain).Queue("gpu").
			Set("head", tagger.CRFHead).Set("loss", tagger.LossCRF).Set("lm_placement", v).
			Pass("scheme", "layers", "epochs", "patience", "seed").Input("embeddings", vec)
		withEncoder(b, t)
		labeled(t)
		readSplit(b, t, "dev", "dev")
		if v != tagger.LMNone {
			t.Input("lm", models)
		}
		finals = append(finals, finishVariant(b, finalModel{step: t, name: fmt.Sprintf("%s-%s", b.Name(), v)}))
	}
	bestVariant(b, variants, finals, nil)
	return nil
}
