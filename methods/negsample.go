package methods

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/nerflow/nerflow/eval"
	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/subset"
	"github.com/nerflow/nerflow/train/tagger"
)

// NegSample trains span classifiers with negative sampling (Li et al.
// 2021), one per sampling, on labels that miss entities: distant labels
// (given, or made from gazetteers) or a partially annotated corpus. With
// mask, it is the missing-annotation experiment instead: the train input's
// gold entities are dropped with each probability p, one tagger per p and
// sampling is trained on each masked corpus, and the dev scores of them all
// are gathered into one table. On distant labels, refine (auto by default)
// first cross-checks them with fold taggers (methods/refine.go): on labels
// of precision 49 the dev split kept the refined ones for every seed, and
// the final model gained 2.6 to 7.8 on a held-out split.
//
//	[label] or [mask x p] -> train x sampling (x p) -> eval-train, test, register (paired) -> table-dev, table-test
func init() {
	spec.RegisterMethod(spec.Method{
		Name: "negsample",
		Doc: "Span classifiers trained with negative sampling for missing annotations (uniform, or weighted by the " +
			"model's uncertainty) on distant or partial labels; with mask, the missing-annotation experiment: gold " +
			"entities dropped with each probability p, every p x sampling trained, scored and gathered into one table. Each tagger is registered under the spec's name." + overlayDoc,
		Params: append([]stages.Param{
			stages.StringListParam("sampling", []string{tagger.SamplingUniform, tagger.SamplingWeighted}, "the samplings compared, one tagger each",
				stages.OneOf(tagger.SamplingUniform, tagger.SamplingWeighted)),
			stages.FloatListParam("mask", nil, "the missing-annotation experiment: probabilities with which the train input's gold entities are dropped (stage "+subset.StageMask+"), one tagger per p and sampling (empty: train on the train input's tags as they are)", stages.Range(0, 1)),
			stages.IntParam("mask_seed", 1, "seed of the dropped entities", stages.AtLeast(0)),
			stages.IntParam("seed", 1, "seed of the taggers", stages.AtLeast(0)),
			tagger.SchemeParam("bio", "tag scheme of the predictions"),
			stages.IntParam("epochs", 10, "training epochs, raised to reach min_steps", stages.Range(1, 1000)),
			minStepsParam("the taggers"),
			wordDropoutParam("the taggers", wordDropout),
			stages.IntParam("max_span", 10, "longest span classified, in tokens", stages.Range(1, 64)),
			stages.FloatParam("neg_ratio", 0.35, "negatives per sentence: ceil(neg_ratio * length) (lambda)", stages.Range(0.01, 10)),
			stages.FloatParam("mu", 8, "weighted sampling: exponent of the O margin", stages.Range(0, 64)),
			tagger.Param("type_miss_rates"),
			tagger.Param("mistype_rates"),
			stages.BoolParam("select", true, "the dev input selects each tagger's best epoch (one prediction of the dev set per epoch); false: the last epoch's tagger"),
			stages.StringParam("complete_file", "", "file of the complete input holding the sentences (empty: its only file)"),
			stages.StringParam("complete_labels", "", "labels file of the complete input, parallel to complete_file"),
		}, append(append(fileParams(), distantParams(refineAuto, capitalizedFalse)...), encoderParams()...)...),
		Inputs: append(distantInputs(), stages.Port{Name: "complete", Kind: "corpus", Optional: true,
			Doc: "the train sentences completely annotated (e.g. CoNLL-2003's true labels beside the distant ones): each epoch reports the missampling rate (with mask, the unmasked train input is used)"},
			encoderInput()),
		Build: buildNegSample,
	})
}

func buildNegSample(b *spec.Builder) error {
	checkFiles(b)
	checkEncoder(b)
	p := b.Params()
	samplings := slices.Compact(slices.Clone(p.Strings("sampling")))
	if len(samplings) == 0 {
		b.Errorf("params.sampling", "want at least one of %s, %s", tagger.SamplingUniform, tagger.SamplingWeighted)
	}
	masks := p.Floats("mask")
	vec := vectors(b)

	t := b.Node("train", tagger.StageTrain).
		Set("head", tagger.SpanHead).Set("loss", tagger.LossNegSample).
		Pass("scheme", "epochs", "min_steps", "word_dropout", "max_span", "neg_ratio", "mu", "seed", "type_miss_rates", "mistype_rates").Input("embeddings", vec)
	withEncoder(b, t)
	var fans []func(*spec.NodeBuilder) // the fan-outs of the train node, for the nodes paired with it
	var rows, columns []string
	rowKey, columnKey := "sampling", ""
	if len(masks) > 0 {
		if b.Has("gazetteers") || b.Has("complete") {
			b.Errorf("params.mask", "masks the train input's gold tags, which are then the complete annotation: connect no gazetteers nor complete input")
		}
		if b.IsSet("overlay") && p.Bool("overlay") {
			b.Errorf("params.overlay", "the gazetteer overlay goes with distant labels, and mask trains on gold ones")
		}
		if b.IsSet("refine") && p.String("refine") != refineOff {
			b.Errorf("params.refine", "refines distant labels, and mask trains on gold ones")
		}
		ps := make([]any, len(masks))
		for i, m := range masks {
			ps[i] = m
			rows = append(rows, strconv.FormatFloat(m, 'g', -1, 64))
		}
		mask := readSplit(b, b.Node("mask", subset.StageMask).FanOut("p", ps...), "train", "corpus").
			Set("seed", p.Int("mask_seed")).Pass("scheme")
		t.Input("corpus", mask.Out("masked"))
		t.Input("complete", b.In("train")).PassAs("complete_file", "train_file").PassAs("complete_labels", "train_labels")
		fans = append(fans, func(n *spec.NodeBuilder) { n.FanOut("p", ps...) })
		rowKey, columnKey, columns = "p", "sampling", samplings
	} else {
		trainingCorpus(b)(t)
		if b.Has("complete") {
			t.Input("complete", b.In("complete")).Pass("complete_file", "complete_labels")
		}
		rows = samplings
	}
	ss := make([]any, len(samplings))
	for i, s := range samplings {
		ss[i] = s
	}
	fans = append(fans, func(n *spec.NodeBuilder) { n.FanOut("sampling", ss...) })
	fan := func(n *spec.NodeBuilder) *spec.NodeBuilder {
		for _, f := range fans {
			f(n)
		}
		return n
	}
	fan(t)
	if p.Bool("select") {
		readSplit(b, t, "dev", "dev")
	}

	// Every tagger (p x sampling) is registered under the spec's name, its
	// versions told apart by their training parameters.
	finish(b, finalModel{step: t, fan: fan, gold: len(masks) > 0})
	for _, e := range []struct{ node, split string }{{"eval-" + t.Name(), "dev"}, {"test", "test"}} {
		if ev := b.Lookup(e.node); ev != nil {
			b.Node("table-"+e.split, eval.StageTable).
				Set("title", fmt.Sprintf("%s: negative sampling, %s split", b.Name(), e.split)).
				Set("row_key", rowKey).Set("rows", rows).Set("column_key", columnKey).Set("columns", columns).
				Input("reports", ev.Out("report")).Input("training", t.Out("report"))
		}
	}
	return nil
}
