package methods

import (
	"strconv"

	"github.com/nerflow/nerflow/distant"
	"github.com/nerflow/nerflow/eval"
	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/registry"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/train/overlay"
	// The methods build graphs of the tagger's stages: linking a method
	// links their registration (package tagger registers them).
	"github.com/nerflow/nerflow/train/tagger"
)

// Every method ends alike, and names the nodes of its ending alike, so that
// a reader (or `make run`, or the dashboard) finds a model's scores by the
// name of the node that trained it, STEP:
//
//	eval-STEP      the model of STEP scored on the dev input, for every step
//	test           the final model scored on the test input
//	register       the final model registered, with its dev and test reports
//	labels-SPLIT   the distant labels scored on a split: the baseline set
//	               beside every evaluation on it (methods on distant labels)
//	select         the step models' best on the dev input, when a method
//	               ends with the best of its steps (bestOnDev); a method
//	               that chooses a setting per step and seed on dev names it
//	               select-STEP (the candidate miss rates of autoner's
//	               variants and of roster's seeds, bestMissRate)
//	overlay-fill, overlay-override, overlay-extend
//	               the final model with the gazetteer overlay in each mode
//	               (stage distant.overlay), each scored as eval-overlay-MODE
//	overlay-capitalized
//	               with capitalized phrases in the training labels (param
//	               capitalized) and name lists, override with the model's
//	               entities that are such phrases only, scored as
//	               eval-overlay-capitalized
//	first-words    the final model alone with the gate of a sentence's
//	               first word (stage
//	               distant.firstwords), scored as eval-first-words
//	overlay-typed  with gazetteers, override (overlay-capitalized's gate
//	               where it is built) with the model's entities of the
//	               types that gain on dev there only, scored as
//	               eval-overlay-typed
//	overlay        of the final model and those, the best on the dev
//	               input (the plain model on a tie): the model tested and
//	               registered, for a method on distant labels (chooseOverlay)
//
// A method with one final model per variant (a parameter that lists them)
// names the last two after their step too, however many variants a spec
// asks for: test-STEP, register-STEP; its overlay nodes are suffixed
// likewise (overlay-fill-STEP, overlay-STEP). A variant that ends with a
// choice on dev (select-VARIANT) names them after the variant. With a dev
// input it then ends with the best of its variants' final models, tested
// and registered as test and register (select; bestVariant).
// conventions_test.go holds every method to this.

// fanout repeats a step's fan-out (e.g. one copy per seed) on a node that
// pairs with it; nil for a step that is not fanned out.
type fanout func(*spec.NodeBuilder) *spec.NodeBuilder

// finalModel is a model a method ends with.
type finalModel struct {
	step *spec.NodeBuilder // the node whose output model it is
	fan  fanout
	name string // its name in the registry (empty: the spec's name)
	// gold: the model learned (masked) gold labels, not distant ones, and
	// no gazetteer overlay goes with it.
	gold bool
	// amongFinals: the model is the choice among final models that each
	// weighed the overlay already (bestVariant's), and weighs none again.
	amongFinals bool
}

// scoreDev scores the model of step on the dev input (node eval-STEP) and
// returns the report; without a dev input it adds nothing and returns the
// empty reference. A second call for one step returns the first's node.
func scoreDev(b *spec.Builder, step *spec.NodeBuilder, fan fanout) spec.Ref {
	if ev := b.Lookup("eval-" + step.Name()); ev != nil {
		return ev.Out("report")
	}
	if ev := scoreOn(b, "dev", "eval-"+step.Name(), step.Out("model"), fan); ev != nil {
		return ev.Out("report")
	}
	return spec.Ref{}
}

// finish ends a method with its final model: scored on the dev input (if
// no step did it before) and on the test input (node test), and registered
// with those reports (node register).
func finish(b *spec.Builder, f finalModel) { end(b, f, "") }

// finishVariant ends a method that has one final model per variant with
// one of them: as finish does, its nodes named test-STEP and register-STEP.
// It returns the model it tested and registered, for bestVariant.
func finishVariant(b *spec.Builder, f finalModel) finalModel { return end(b, f, "-"+f.step.Name()) }

// end returns the model it tested and registered: f, or the choice of f
// with the gazetteer overlay.
func end(b *spec.Builder, f finalModel, suffix string) finalModel {
	if chosen := chooseOverlay(b, f, suffix); chosen != nil {
		f = *chosen
	}
	var reports []spec.Ref
	if dev := scoreDev(b, f.step, f.fan); !dev.Empty() {
		reports = append(reports, dev)
	}
	if ev := scoreOn(b, "test", "test"+suffix, f.step.Out("model"), f.fan); ev != nil {
		reports = append(reports, ev.Out("report"))
	}
	reg := b.Node("register"+suffix, registry.StageName).Input("model", f.step.Out("model")).Input("reports", reports...)
	if f.name != "" {
		reg.Set("name", f.name)
	}
	if f.fan != nil {
		f.fan(reg)
	}
	return f
}

// bestVariant ends a method that has one final model per variant, each
// tested and registered under its variant's name (end with suffix
// -VARIANT), with the one the dev input scores best: node select, per seed
// where the variants fan out over seeds (a later variant on a tie), tested
// and registered as test and register under the spec's name. A user wants
// one tagger from a run, and which variant suits a corpus is what its dev
// split says: AutoNER's fuzzy variant scored 2.4 above Tie-or-Break on
// CoNLL-2003's labels and 0.15 below it on BC5CDR's. With one variant, or
// without a dev input to choose on, it adds nothing.
func bestVariant(b *spec.Builder, variants []string, finals []finalModel, fan fanout) {
	if len(finals) < 2 || !b.Has("dev") {
		return
	}
	sel := b.Node("select", eval.StageSelect).Set("names", variants)
	for _, f := range finals {
		sel.Input("models", f.step.Out("model")).Input("reports", scoreDev(b, f.step, f.fan))
	}
	if fan != nil {
		fan(sel)
	}
	finish(b, finalModel{step: sel, fan: fan, name: b.Name(), amongFinals: true})
}

// scoreOn adds node name, which scores model on the corpus input split
// (dev or test) beside the distant labels' score if the method has them,
// and returns it; without that input it adds nothing and returns nil.
func scoreOn(b *spec.Builder, split, name string, model spec.Ref, fan fanout) *spec.NodeBuilder {
	if !b.Has(split) {
		return nil
	}
	ev := readSplit(b, b.Node(name, tagger.StageEvaluate).Input("model", model), split, "gold")
	if base := labelsBaseline(b, split); !base.Empty() {
		ev.Input("baseline", base)
	}
	if fan != nil {
		fan(ev)
	}
	return ev
}

// labelsBaseline returns the report of the distant labels on the corpus
// input split (node labels-SPLIT: the gazetteers' labels of its sentences
// scored against its gold tags), which every evaluation on that split sets
// beside the model's score: what a model gains over simply applying the
// gazetteers. With name lists, the person names they find in the split's
// own sentences (node names-SPLIT) label it too, as `nerflow distant
// --names` labels a corpus: the rule applied to the split, not only the
// names the training text held. Without gazetteers (distant tags given as
// they are, or a method on gold labels) there is nothing to apply, and it
// returns the empty reference.
func labelsBaseline(b *spec.Builder, split string) spec.Ref {
	if !b.Declares("gazetteers") || !b.Has("gazetteers") {
		return spec.Ref{}
	}
	name := "labels-" + split
	n := b.Lookup(name)
	if n == nil {
		n = labelingNode(b, name).Input("gazetteers", b.In("gazetteers")).Input("stopwords", b.In("stopwords"))
		if b.Has("names") {
			names := b.Node("names-"+split, distant.StageNames).Input("names", b.In("names")).Input("gazetteers", b.In("gazetteers"))
			readSplit(b, names, split, "corpus")
			n.Input("mined", names.Out("gazetteer"))
		}
		readSplit(b, n, split, "corpus")
		readSplit(b, n, split, "gold")
	}
	return n.Out("report")
}

// candidate is one step whose models bestOnDev weighs: a step fanned out
// (over seeds, over miss rates) gives one model per copy.
type candidate struct {
	step   *spec.NodeBuilder
	fan    fanout   // the step's fan-out (nil: one model)
	copies []string // what tells its copies apart in their names, in fan-out order
	name   string
}

// seedCopies names the copies of a step fanned out over seeds.
func seedCopies(seeds []int) []string {
	if len(seeds) < 2 {
		return nil
	}
	copies := make([]string, len(seeds))
	for i, s := range seeds {
		copies[i] = strconv.Itoa(s)
	}
	return copies
}

// bestOnDev adds node select, which keeps the model of the candidates that
// the dev input scores best (a later step on a tie), and returns it as the
// final model. A method whose later steps learn from its earlier ones
// (a student from its teachers) may end below them on a small corpus;
// choosing on dev keeps the better model and reports every candidate.
// Without a dev input there is nothing to choose on: it returns nil.
func bestOnDev(b *spec.Builder, cands ...candidate) *finalModel {
	if !b.Has("dev") {
		return nil
	}
	sel := b.Node("select", eval.StageSelect)
	var names []string
	for _, c := range cands {
		sel.Input("models", c.step.Out("model"))
		sel.Input("reports", scoreDev(b, c.step, c.fan))
		if len(c.copies) > 0 {
			for _, copy := range c.copies {
				names = append(names, c.name+" "+copy)
			}
		} else {
			names = append(names, c.name)
		}
	}
	sel.Set("names", names)
	return &finalModel{step: sel, name: b.Name()}
}

// overlayDoc ends the doc of every method on distant labels.
const overlayDoc = " With a dev input, the final model is also tried with the gazetteer overlay (the gazetteers' " +
	"matches combined with its entities at prediction, modes fill, override and extend, and with gazetteers override with " +
	"the model's entities of the types that gain on dev only; the model alone with the gate of a sentence's first word, " +
	"node first-words) and the best of them on dev is tested and registered (node overlay; " +
	"overlay=false: the model alone)."

// overlayParam declares overlay, which every method on distant labels
// takes (distantParams).
func overlayParam() stages.Param {
	return stages.BoolParam("overlay", true, "with a dev input: the final model is also tried with the gazetteer "+
		"overlay (stage "+distant.StageOverlay+": the gazetteers' matches, or without gazetteers the phrases tagged in "+
		"the distantly labeled train input, combined with the model's entities at prediction), in mode fill (the "+
		"model's entities kept, matches that overlap none added) and override (matches kept, the model's entities "+
		"that overlap none added) and extend (as override, but a wider entity of the model of a match's type keeps the "+
		"matches it holds: the longer name of which the gazetteer knows a part), and with gazetteers override again keeping "+
		"the model's entities only of the types whose dev F1 they did not lower in override (node overlay-typed), and "+
		"the model alone with the gate of a sentence's first word (stage "+distant.StageFirstWords+", node "+
		"first-words: an entity loses a first word the training text writes in lower case); of these and the model alone, the one the dev input scores best is tested and registered (node "+
		"overlay; the model alone on a tie) (false: the model alone)")
}

// overlaid reports whether the method ends by choosing among its final
// model and the model with the gazetteer overlay: a method on distant
// labels (it declares the parameter overlay) that has a dev input to
// choose on, with overlay left on.
func overlaid(b *spec.Builder) bool {
	on, declared := b.Params().Map()["overlay"]
	return declared && on == true && b.Has("dev")
}

// chooseOverlay adds, for a method on distant labels with a dev input, the
// final model with the gazetteer overlay in each mode (nodes
// overlay-MODE, stage distant.overlay), each scored on dev, and node
// overlay, which keeps the best on dev of them and the model alone, and
// returns that as the final model; otherwise it adds nothing and returns
// nil. A gazetteer is precise where it matches and a tagger trained on a
// small corpus recalls less than it: combining them may beat both, or
// lose to the model alone, and the dev split says which. The overlay
// holds the gazetteers that labeled the train input, or the phrases
// tagged in it when its distant tags were given.
func chooseOverlay(b *spec.Builder, f finalModel, suffix string) *finalModel {
	if f.gold || f.amongFinals || !overlaid(b) {
		return nil
	}
	plain := scoreDev(b, f.step, f.fan)
	sel := b.Node("overlay"+suffix, eval.StageSelect)
	// overlayNode adds the final model with the overlay of the train
	// input's phrases in mode, as node name, to the candidates.
	overlayNode := func(name string, mode overlay.Mode) (*spec.NodeBuilder, spec.Ref) {
		n := b.Node(name+suffix, distant.StageOverlay).Set("mode", string(mode)).Input("model", f.step.Out("model"))
		if b.Has("gazetteers") {
			n.Pass("case").Input("gazetteers", b.In("gazetteers")).Input("stopwords", b.In("stopwords"))
			if b.Has("names") {
				// The names of the sentences it tags, found there as each
				// split's labels find them (labelsBaseline). Not the
				// training text's names too: matched as a gazetteer, its
				// surnames tagged the test split's Green Bay Rd. and Old
				// Bailey (27 PER entities more than the labels, 3 right).
				readSplit(b, n.Input("names", b.In("names")), "train", "names_corpus")
			}
		} else {
			readSplit(b, n, "train", "labeled")
		}
		if f.fan != nil {
			f.fan(n)
		}
		dev := scoreDev(b, n, f.fan)
		sel.Input("models", n.Out("model")).Input("reports", dev)
		return n, dev
	}
	// eval.select gives a tie to the later candidate: the modes come
	// first, the model alone last, so that the overlay is added only where
	// the dev split says it helps; of the modes, the one that keeps more
	// of the model's entities comes later.
	var names []string
	var overrideDev spec.Ref
	for _, mode := range []overlay.Mode{overlay.Override, overlay.Extend, overlay.Fill} {
		_, dev := overlayNode("overlay-"+string(mode), mode)
		if mode == overlay.Override {
			overrideDev = dev
		}
		names = append(names, "overlay "+string(mode))
	}
	// With capitalized phrases in the training labels, override once more
	// admitting only the model's entities that are such a phrase of their
	// sentence (node overlay-capitalized): trained on them, the model also
	// tags parts of longer names, days and common words. The gate reads the
	// name lists, which the overlay holds with gazetteers only.
	gated := capitalizedOn(b) && b.Has("gazetteers") && b.Has("names")
	if gated {
		n, dev := overlayNode("overlay-capitalized", overlay.Override)
		n.Set("capitalized", true)
		overrideDev = dev
		names = append(names, "overlay override, capitalized phrases")
	}
	// Override again (gated where overlay-capitalized is), the model's
	// entities kept only for the types whose dev F1 they did not lower
	// there (node overlay-typed): on the shipped sample its PER entities
	// spoiled more than they found, while its other ones added recall. It
	// needs the labels' score on dev beside the model's, which only
	// gazetteers give (labels-dev).
	if !labelsBaseline(b, "dev").Empty() {
		typed, _ := overlayNode("overlay-typed", overlay.Override)
		typed.Input("dev_report", overrideDev)
		if gated {
			typed.Set("capitalized", true)
		}
		names = append(names, "overlay override, the types that gain on dev")
	}
	// The model alone once more, each entity that begins with a
	// sentence's common first word losing it (node first-words): a model
	// that learned capitalized words as names, from capitalized phrases
	// above all, also tags "Dealers said ...", which the overlays above
	// keep in fill and add in override wherever no match is. The
	// gazetteer overlay's gate (overlay-capitalized) leaves such words
	// out too, but it admits only exact phrases: on CoNLL-2003's
	// validation split that cost bond's model more recall than it gained
	// in precision. A text that does not write its names capitalized
	// gets the model back unchanged, whose evaluation is the model
	// alone's from the cache and ties with it.
	first := b.Node("first-words"+suffix, distant.StageFirstWords).Input("model", f.step.Out("model"))
	distantLabels(b, first, "text")
	if f.fan != nil {
		f.fan(first)
	}
	sel.Input("models", first.Out("model")).Input("reports", scoreDev(b, first, f.fan))
	names = append(names, "model, common first words off its entities")
	sel.Input("models", f.step.Out("model")).Input("reports", plain).Set("names", append(names, "model"))
	if f.fan != nil {
		f.fan(sel)
	}
	return &finalModel{step: sel, fan: f.fan, name: f.name}
}
