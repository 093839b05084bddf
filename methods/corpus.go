// Package methods holds nerflow's methods: named, typed templates of
// pipelines (spec.Method), one file each, registered at init. A spec calls
// one with `method: NAME` (docs/spec.md); `nerflow methods` lists them.
//
// This file holds what several methods share: the corpus inputs of a
// tagger (train, dev, test, word vectors) and how they reach the stages.
package methods

import (
	"github.com/nerflow/nerflow/distant"
	"github.com/nerflow/nerflow/embeddings"
	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/train/tagger"
)

// splits are the corpus inputs of a tagger method, in the order the word
// vectors read them.
var splits = []string{"train", "dev", "test"}

// corpusInputs declares the inputs of a method that trains a tagger; train
// says what it holds.
func corpusInputs(train string) []stages.Port {
	return []stages.Port{
		{Name: "train", Kind: "corpus", Doc: train},
		{Name: "dev", Kind: "corpus", Optional: true, Doc: "sentences with gold tags: selects the epoch and is scored"},
		{Name: "test", Kind: "corpus", Optional: true, Doc: "sentences with gold tags, scored on the final model"},
		{Name: "vectors", Kind: "vectors", Optional: true, Doc: "pretrained word vectors (the wink package of scripts/setup.sh); without them words are learned"},
	}
}

// fileParams declares, for each corpus input, which files of its artifact
// hold the sentences and their tags (CoNLL-2003's directory holds
// train_text.txt with train_label_dist.txt, ...), and which files the word
// vectors read.
func fileParams() []stages.Param {
	var ps []stages.Param
	for _, s := range splits {
		ps = append(ps,
			stages.StringParam(s+"_file", "", "file of the "+s+" input holding the sentences (empty: its only file)"),
			stages.StringParam(s+"_labels", "", "labels file of the "+s+" input, parallel to "+s+"_file (empty: tags come with the sentences)"))
	}
	return append(ps, stages.StringListParam("vocab_files", nil, "patterns (path.Match) of the files of the corpus inputs whose words get word vectors (empty: every file)"))
}

// checkFiles reports a *_file or *_labels set for a corpus input that is
// not connected.
func checkFiles(b *spec.Builder) {
	for _, s := range splits {
		if b.Has(s) {
			continue
		}
		for _, p := range []string{s + "_file", s + "_labels"} {
			if b.IsSet(p) {
				b.Errorf("params."+p, "names a file of the input %s, which is not connected", s)
			}
		}
	}
}

// readSplit connects the corpus input split to port of a tagger stage
// (train.tagger's corpus and dev, train.evaluate's gold), with its files.
func readSplit(b *spec.Builder, n *spec.NodeBuilder, split, port string) *spec.NodeBuilder {
	return n.Input(port, b.In(split)).PassAs(port+"_file", split+"_file").PassAs(port+"_labels", split+"_labels")
}

// vectors adds the node that restricts the word vectors to the words of the
// corpus inputs (and of more corpora, such as unlabeled sentences), and
// returns its output; without a vectors input it adds nothing and returns
// the empty reference. A later call adds its corpora to the first's node.
func vectors(b *spec.Builder, more ...spec.Ref) spec.Ref {
	if !b.Has("vectors") {
		return spec.Ref{}
	}
	if n := b.Lookup("vectors"); n != nil {
		return n.Input("corpora", more...).Out("embeddings")
	}
	return b.Node("vectors", embeddings.StageName).PassAs("files", "vocab_files").
		Input("vectors", b.In("vectors")).
		Input("corpora", append([]spec.Ref{b.In("train"), b.In("dev"), b.In("test")}, more...)...).
		Out("embeddings")
}

// distantInputs declares the inputs of a method on distant labels: the
// tagger's corpus inputs, and gazetteers (with stopwords) that label the
// train input.
func distantInputs() []stages.Port {
	return append(corpusInputs("sentences with distant tags, or raw sentences (one file) to label with the gazetteers"),
		stages.Port{Name: "gazetteers", Kind: "gazetteer", Many: true, Optional: true,
			Doc: "phrase lists: label the train input with them (stage " + distant.StageName + ") instead of reading its tags"},
		stages.Port{Name: "stopwords", Kind: "stopwords", Optional: true, Doc: "words whose phrases the gazetteers do not match"},
		stages.Port{Name: "names", Kind: "names", Many: true, Optional: true,
			Doc: "lists of first names and titles (stage " + distant.StageNames + "): the person names they find in the train input label it as PER beside the gazetteers (e.g. examples/data/names/names.tsv)"})
}

// gazetteersFor returns the phrase lists of the train input's labels as
// one list: the gazetteers input and, with name lists, the person names
// found in the train input (minedNames), for the nodes that match them
// elsewhere (the overlay of a final model, autoner's Tie-or-Break labels).
func gazetteersFor(b *spec.Builder) []spec.Ref {
	return append([]spec.Ref{b.In("gazetteers")}, minedNames(b)...)
}

// minedNames returns, with name lists, the person names found in the train
// input (node names, added by the first caller), which a labeling node
// reads as input mined: they label the train input, but give no entry
// sentences, since it holds every one of them already.
func minedNames(b *spec.Builder) []spec.Ref {
	if !b.Has("names") {
		return nil
	}
	n := b.Lookup("names")
	if n == nil {
		n = b.Node("names", distant.StageNames).Input("names", b.In("names")).Input("gazetteers", b.In("gazetteers")).
			Input("corpus", b.In("train"))
	}
	return []spec.Ref{n.Out("gazetteer")}
}

// distantParams declares the parameters of a method on distant labels
// that its label node reads, overlay, which its ending reads, and the
// refinement of its labels (refineParams), refine and capitalized at the
// method's defaults.
func distantParams(refine, capitalized string) []stages.Param {
	return append([]stages.Param{
		stages.StringParam("case", "exact", "with gazetteers: letter case matching of every labeling node (label, labels-dev, labels-test): exact, fold, or variants (as written, UPPER, lower)", stages.OneOf("exact", "fold", "variants")),
		stages.BoolParam("entry_sentences", false, "with gazetteers: every typed entry is also a training sentence of its own, so that the taggers learn the entries the corpus never mentions (for gazetteers of up to a few thousand entries)"),
		stages.FloatParam("entry_share", 0.5, "entry_sentences: at most this many entry sentences per sentence of the training corpus, an evenly spread subset of the entries where the gazetteers have more (0: every entry); the text, where entities have context, keeps outweighing isolated phrases",
			stages.Range(0, 1000)),
		stages.BoolParam("abbreviations", true, "with gazetteers: every labeling node (label, labels-dev, labels-test, tiebreak-labels) also types the abbreviations its corpus defines after a typed match, \"nitroglycerin ( NTG )\": every NTG, as written, takes the long form's type where no typed match covers it (on by default: on BC5CDR it added 0.5-1.2 dev F1 to the final models of roster, bond and autoner, and a text that defines no short form keeps its labels byte for byte; docs/autoner.md)"),
		stages.StringParam("capitalized", capitalized, "the training labels (node label, or with labels given as files node capitalized, stage "+distant.StageCapitalized+") also tag with the unknown type \"?\" the capitalized phrases inside a sentence between their entities, less the titles and common words of the names input (a run that holds entities is a longer name in their place; a phrase that ends in a head word of the names input, head:ORG Committee, has its type), and the taggers trained on them count those as entities of the type their context gives (unknown_as_entity): English running text names most entities with capitals, and a small gazetteer misses half of them. A corpus whose typed entities mostly begin in lower case gets no phrases (the labeling node's min_capital_share; its report says). auto: on where the names input is connected (it tells a title, a day or a month from a name) and refine is not set on or auto, off otherwise; true, false: as set. With the phrases, refine is off unless set; set, the phrases are added after it, to the labels it keeps. roster, bond and autoner default to auto: on both held-out stand-ins the phrases gained more than refine (autoner's dev F1 by 1.6 and 2.1, every seed above every seed without them); negsample and distant to false (negsample lost with them on both small stand-ins; its CoNLL-2003 example sets true; docs/accuracy.md, \"Capitalized phrases by default\", \"autoner with the phrases\", docs/negsample.md)", stages.OneOf(capitalizedAuto, capitalizedTrue, capitalizedFalse)),
		overlayParam(),
	}, refineParams(refine)...)
}

// The settings of param capitalized: auto, the phrases where the name
// lists are connected and refine is not set on (capitalizedOn).
const (
	capitalizedAuto  = "auto"
	capitalizedTrue  = "true"
	capitalizedFalse = "false"
)

// capitalizedOn tells whether the training labels hold capitalized phrases
// (param capitalized). auto asks for the names input, without which titles,
// days and months would begin phrases, and yields to refine where a spec
// sets that on: the two together (refineLabels) cost the refinement's
// taggers and scored below the phrases alone (docs/accuracy.md), so they
// run together only where both are set. A corpus that does not write its
// entities capitalized still gets no phrases, decided at run time on its
// labels (min_capital_share).
func capitalizedOn(b *spec.Builder) bool {
	switch b.Params().String("capitalized") {
	case capitalizedTrue:
		return true
	case capitalizedAuto:
		return b.Has("names") && (!b.IsSet("refine") || b.Params().String("refine") == refineOff)
	}
	return false
}

// labelingNode adds a labeling node (stage distant.label) with the params
// every labeling node of a method shares: the labels of each split and
// the training labels follow one rule.
func labelingNode(b *spec.Builder, name string) *spec.NodeBuilder {
	return b.Node(name, distant.StageName).Pass("scheme", "case", "abbreviations")
}

// trainingCorpus returns what connects the distantly labeled training
// corpus to a node's corpus port: the train input's tags, or distant labels
// made from the gazetteers (a node label, added here); with param refine,
// those labels cross-checked by fold taggers (refineLabels).
//
// With param capitalized, the taggers trained on them count the labels'
// unknown-type phrases as entities (unknown_as_entity): they are the
// capitalized phrases no gazetteer matched, and left out of the loss they
// would teach nothing. With both, the refinement weighs the labels without
// the phrases, and the phrases are added to the labels it keeps
// (refineLabels).
func trainingCorpus(b *spec.Builder) func(n *spec.NodeBuilder) {
	capitalized := capitalizedOn(b)
	if mode := refineMode(b); mode != refineOff {
		refined := refineLabels(b, mode, givenLabels(b, false), capitalized)
		return func(n *spec.NodeBuilder) { learnPhrases(n.Input("corpus", refined), capitalized) }
	}
	given := givenLabels(b, capitalized)
	return func(n *spec.NodeBuilder) {
		given(n, "corpus")
		learnPhrases(n, capitalized)
	}
}

// learnPhrases makes n, where it trains a tagger on labels that hold
// capitalized phrases, count their unknown type as entities
// (unknown_as_entity): the method's taggers and the refinement's check
// taggers alike.
func learnPhrases(n *spec.NodeBuilder, phrases bool) {
	if phrases && n.Stage() == tagger.StageTrain {
		n.Set("unknown_as_entity", true)
	}
}

// givenLabels returns what connects the distant labels, as given or made
// from the gazetteers (node label), to a port of a node: the train input
// with its file params, or the label node's output; with phrases, the
// capitalized phrases added to them (by the label node, or with labels
// given as files by node capitalized).
func givenLabels(b *spec.Builder, phrases bool) func(n *spec.NodeBuilder, port string) {
	if !b.Has("gazetteers") {
		if phrases {
			// The labels as given, with the capitalized phrases of
			// their gaps; the name lists and the stopwords then only
			// say which capitalized words name nothing.
			caps := withPhrases(b, "capitalized", func(n *spec.NodeBuilder) { readSplit(b, n, "train", "corpus") })
			return func(n *spec.NodeBuilder, port string) { n.Input(port, caps) }
		}
		if !capitalizedOn(b) {
			if b.Has("stopwords") {
				b.Errorf("inputs.stopwords", "stopwords only matter with gazetteers or capitalized")
			}
			if b.Has("names") {
				b.Errorf("inputs.names", "the person names label the train input beside the gazetteers: connect gazetteers too")
			}
		}
		return func(n *spec.NodeBuilder, port string) { readSplit(b, n, "train", port) }
	}
	for _, f := range []string{"train_file", "train_labels"} {
		if b.IsSet(f) {
			b.Errorf("params."+f, "the gazetteers label the train input, which is one file of raw sentences: connect that file instead")
		}
	}
	label := labelingNode(b, "label").Pass("entry_sentences", "entry_share").
		Input("corpus", b.In("train")).Input("gazetteers", b.In("gazetteers")).Input("mined", minedNames(b)...).
		Input("stopwords", b.In("stopwords"))
	if phrases {
		label.Set("capitalized", true).Input("names", b.In("names"))
	}
	return func(n *spec.NodeBuilder, port string) { n.Input(port, label.Out("labeled")) }
}

// distantLabels connects the distant labels before any refinement to port
// of n: the train input's, or those the gazetteers made (node label, which
// trainingCorpus added; with capitalized, the phrases among them). For a
// node after training that reads the training text and its labels.
func distantLabels(b *spec.Builder, n *spec.NodeBuilder, port string) {
	if label := b.Lookup("label"); label != nil {
		n.Input(port, label.Out("labeled"))
		return
	}
	readSplit(b, n, "train", port)
}

// withPhrases adds node name (stage distant.capitalized), which adds the
// capitalized phrases to the labels that connect (to its corpus port), and
// returns its labels.
func withPhrases(b *spec.Builder, name string, connect func(n *spec.NodeBuilder)) spec.Ref {
	n := b.Node(name, distant.StageCapitalized).Pass("scheme").Input("names", b.In("names")).Input("stopwords", b.In("stopwords"))
	connect(n)
	return n.Out("labeled")
}

// fanSeeds adds the seeds to a node: one seed is its parameter seed (if
// param), several a fan-out, which nodes downstream share to pair with the
// right copy.
func fanSeeds(n *spec.NodeBuilder, seeds []int, param bool) *spec.NodeBuilder {
	switch {
	case len(seeds) > 1:
		vals := make([]any, len(seeds))
		for i, s := range seeds {
			vals[i] = s
		}
		n.FanOut("seed", vals...)
	case param && len(seeds) == 1:
		n.Set("seed", seeds[0])
	}
	return n
}

// partialOnLabels makes n a partial-label CRF on the distant labels, at
// the method's miss rate and per-type noise.
func partialOnLabels(n *spec.NodeBuilder) *spec.NodeBuilder {
	return n.Set("head", tagger.CRFHead).Set("loss", tagger.LossPartial).Pass("miss_rate", "type_miss_rates", "mistype_rates")
}

// refuseLabelNoise reports the per-type noise parameters as given where no
// partial-label CRF trains on the distant labels (why says what would). An
// empty list is no noise, so that `--set type_miss_rates=` clears a spec's
// rates for an ablation without partial-label CRFs.
func refuseLabelNoise(b *spec.Builder, why string) {
	for _, name := range []string{"type_miss_rates", "mistype_rates"} {
		if len(b.Params().Strings(name)) > 0 {
			b.Errorf("params."+name, "%s (clear it with --set %s=)", why, name)
		}
	}
}

// wordDropout is the share of training tokens that roster's, negsample's
// and autoner's taggers read as the unknown word (word_dropout), chosen on
// CoNLL-2003's dev split and checked on a held-out test split
// (docs/tagger.md, docs/roster.md, docs/negsample.md; autoner on BC5CDR's
// dev split too, docs/autoner.md). Bond keeps 0: on that held-out split
// its stage 2 lost with it, and on BC5CDR's dev split it gained nothing
// (docs/bond.md; examples/conll03-bond.yaml sets it). Distant keeps 0:
// on a small corpus it lowered every variant (docs/tagger.md).
const wordDropout = 0.25

// wordDropoutParam declares the tagger's word_dropout (its doc and range
// as train.tagger declares them) for a distant method, which passes it to
// every tagger it trains from scratch (what names them; a step that goes on
// training one keeps its rate), at the default def.
func wordDropoutParam(what string, def float64) stages.Param {
	p := tagger.Param("word_dropout")
	p.Default, p.Doc = def, what+": "+p.Doc
	return p
}

// minStepsParam declares min_steps, the floor on training steps that the
// distant methods pass to their training nodes (what names those nodes):
// a BiLSTM needs updates, not epochs, and a small corpus has few steps an
// epoch.
func minStepsParam(what string) stages.Param {
	return stages.IntParam("min_steps", 1000, what+" train at least this many steps: epochs raised to "+
		"ceil(min_steps / steps per epoch) (CoNLL-2003 at batch 32 has 439 steps an epoch and keeps its epochs; "+
		"1,100 sentences at batch 16 have 69) (0: epochs as given)", stages.AtLeast(0))
}
