package methods

import (
	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/refine"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/train/tagger"
)

// The settings of param refine.
const (
	refineOff  = "off"
	refineOn   = "on"
	refineAuto = "auto"
)

// refineParams declares the refinement of the distant labels that every
// method on them offers (refineLabels), at the default def.
func refineParams(def string) []stages.Param {
	return []stages.Param{
		stages.StringParam("refine", def, "cross-check the distant labels before training on them (nodes refine-*, package refine): refine_folds partial-label CRFs, each trained on the sentences that mention none of one fold's labeled strings, tag that fold, and a labeled string they predict in fewer than half of its mentions becomes of unknown type, left out of the loss. on: train on the refined labels; auto: also train a tagger on each of the given and the refined labels, and keep the labels whose tagger scores better on the dev input (node refine; without dev: off), as refinement pays on labels of low precision and costs on labels of high precision; off: the labels as given. Measured with roster, bond, negsample and autoner, whose default is auto (docs/accuracy.md, \"Label refinement\"); where the training labels hold capitalized phrases (param capitalized), it is off unless set, and set it weighs the labels without the phrases, a rejected string becomes O, and the phrases are added after it (a rejected capitalized label so becomes an entity of unknown type)", stages.OneOf(refineOff, refineOn, refineAuto)),
		stages.IntParam("refine_folds", 5, "refine: the folds, one tagger each", stages.Range(2, 100)),
	}
}

// refineMode is param refine as the spec's other settings leave it: off
// where the training labels hold capitalized phrases and refine is not
// set (the phrases gained more than the refinement on both held-out
// stand-ins, docs/accuracy.md), and off for auto without a dev input.
func refineMode(b *spec.Builder) string {
	mode := b.Params().String("refine")
	if !b.IsSet("refine") && capitalizedOn(b) {
		mode = refineOff
	}
	if mode == refineAuto && !b.Has("dev") {
		if b.IsSet("refine") {
			b.Errorf("params.refine", "%s keeps the labels whose tagger scores better on the dev input, which is not connected (refine=%s trains on the refined labels without it)", refineAuto, refineOn)
		}
		mode = refineOff
	}
	if mode == refineOff && b.IsSet("refine_folds") {
		b.Errorf("params.refine_folds", "applies to refine=%s or %s", refineOn, refineAuto)
	}
	return mode
}

// refineLabels adds the refinement of the distant labels that given
// connects (to a node's port) in mode (refineMode: on or auto), and
// returns the labels to train on.
//
//	folds (refine-folds[fold=k]) -> refine-fold[fold=k] -> refine-predict[fold=k] -> refine-vote
//	auto: refine-vote -> refine-given, refine-refined; their eval-* -> refine (refine.choose)
//
// The taggers are partial-label CRFs trained as the method's first step
// trains its own (scheme, epochs, min_steps, word_dropout, miss_rate where
// the method has one rate, the label noise by type, the encoder it
// fine-tunes, the first of its seeds): the refinement asks what the
// method's taggers would make of each label.
//
// With phrases (param capitalized) the vote makes a rejected string O, and
// the capitalized phrases are added after it to the labels given and
// refined (nodes capitalized-given, capitalized-refined), which the check
// taggers learn as the method's taggers do (unknown_as_entity). A rejected
// label that is a capitalized phrase so becomes an entity of unknown type,
// the rest no entity: the phrases' "?" is an entity, where the vote's own
// "?" is a token left out of the loss, and one corpus cannot say both.
func refineLabels(b *spec.Builder, mode string, given func(n *spec.NodeBuilder, port string), phrases bool) spec.Ref {
	p := b.Params()
	k := p.Int("refine_folds")
	fold := make([]any, k)
	for i := range fold {
		fold[i] = i
	}
	fan := func(n *spec.NodeBuilder) *spec.NodeBuilder { return n.FanOut("fold", fold...) }

	folds := b.Node("refine-folds", refine.StageFolds).Set("folds", k).Set("seed", firstSeed(b)).Pass("scheme")
	given(folds, "corpus")
	fan(folds)
	foldTagger := refineTagger(b, "refine-fold", fan).Input("corpus", folds.Out("train"))
	predict := fan(b.Node("refine-predict", tagger.StagePredict)).
		Input("model", foldTagger.Out("model")).Input("corpus", folds.Out("held"))
	vote := b.Node("refine-vote", refine.StageVote).Pass("scheme").Input("predictions", predict.Out("tagged"))
	given(vote, "corpus")
	labeled := func(name string) spec.Ref { return vote.Out(name) }
	if phrases {
		vote.Set("rejected", refine.RejectO)
		labeled = func(name string) spec.Ref {
			return withPhrases(b, "capitalized-"+name, func(n *spec.NodeBuilder) { n.Input("corpus", vote.Out(name)) })
		}
	}
	if mode == refineOn {
		return labeled(refine.LabelsRefined)
	}

	// Both check taggers read the labels that refine passes on
	// unchanged, so the method's tagger of the check's recipe and seed on
	// the kept labels is the check tagger, trained once.
	check := func(name string) (labels, report spec.Ref) {
		labels = labeled(name)
		t := refineTagger(b, "refine-"+name, nil).Input("corpus", labels)
		learnPhrases(t, phrases)
		return labels, scoreDev(b, t, nil)
	}
	asGiven, givenReport := check(refine.LabelsGiven)
	refined, refinedReport := check(refine.LabelsRefined)
	choose := b.Node("refine", refine.StageChoose).
		Input(refine.LabelsGiven, asGiven).Input(refine.LabelsRefined, refined).
		Input("given_report", givenReport).Input("refined_report", refinedReport)
	return choose.Out("corpus")
}

// refineTagger adds a partial-label CRF of the refinement (fan: its
// fan-out, nil for none), trained as the method's first step trains its
// own and scored on the dev input (node eval-NAME), which also picks its
// best epoch.
func refineTagger(b *spec.Builder, name string, fan fanout) *spec.NodeBuilder {
	n := b.Node(name, tagger.StageTrain).Queue("gpu").Set("head", tagger.CRFHead).Set("loss", tagger.LossPartial).
		Set("seed", firstSeed(b)).Pass("scheme", "min_steps", "word_dropout").Input("embeddings", vectors(b))
	m := b.Params().Map()
	switch r := m["miss_rate"].(type) {
	case float64:
		n.Pass("miss_rate")
	case []float64:
		// Candidates: the check trains at the stage's default, 0.5,
		// which is the method's own first step at that rate, so the two
		// share a node key; a single rate listed is the method's rate.
		if len(r) == 1 {
			n.Set("miss_rate", r[0])
		}
	}
	for _, name := range []string{"epochs", "type_miss_rates", "mistype_rates"} {
		if _, ok := m[name]; ok {
			n.Pass(name)
		}
	}
	if b.Declares("encoder") {
		withEncoder(b, n)
	}
	readSplit(b, n, "dev", "dev")
	if fan != nil {
		fan(n)
	}
	scoreDev(b, n, fan)
	return n
}

// firstSeed is the method's first seed (param seeds or seed), which the
// refinement's taggers train with: a method's seed sets then differ in
// their refinement too.
func firstSeed(b *spec.Builder) int {
	p := b.Params().Map()
	if s, ok := p["seeds"].([]int64); ok && len(s) > 0 {
		return int(s[0])
	}
	if s, ok := p["seed"].(int64); ok {
		return int(s)
	}
	return 1
}
