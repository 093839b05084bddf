package distant

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/stages"
)

// StageCapitalized adds capitalized phrases to labels given as they are
// (CoNLL-2003's distant labels, a team's own matcher's output), as
// distant.label's param capitalized adds them to the labels it makes.
const StageCapitalized = "distant.capitalized"

func init() {
	stages.Register(stages.Stage{
		Name:    StageCapitalized,
		Version: 4, // 2: longer names holding the given entities, 3: none where the entities are not capitalized, 4: meta labels kept
		Doc: "Adds to a labeled corpus the capitalized phrases between and around its entities as entities of unknown type \"?\" " +
			"(runs of capitalized words inside a sentence that no title, common word of the name lists or stopword breaks, less those " +
			"words, initials, name suffixes and a first word the corpus writes in lower case at their ends; none in a headline, most " +
			"of its words in capitals; a run that holds entities beside such words is a longer name in their place, less the words " +
			"before a person's name), as " + StageName + "'s capitalized does for the labels it makes: for labels given as they are.",
		Params: append([]stages.Param{
			stages.StringParam("scheme", "bio", "tag scheme of the output", stages.OneOf("io", "bio", "iob1", "bioes")),
			minCapitalShareParam(),
			stages.IntParam("min_common", 2, "a phrase's first word whose lower-case form occurs this often in the corpus is a common word and left out", stages.AtLeast(1)),
			stages.IntParam("top", 20, "most frequent phrases listed in the report", stages.Range(0, 10000)),
		}, dataset.SourceParams("corpus", "labeled sentences")...),
		Inputs: []stages.Port{
			{Name: "corpus", Kind: "corpus", Doc: "sentences with their (distant) tags, in any scheme"},
			{Name: "names", Kind: "names", Many: true, Optional: true, Doc: "name lists (KIND<TAB>WORD, as " + StageNames + " reads them): their titles and common words (days, months) are no phrase of their own"},
			{Name: "stopwords", Kind: "stopwords", Optional: true, Doc: "one word per line: no phrase begins or ends with one"},
		},
		Outputs: []stages.Port{
			{Name: "labeled", Kind: "corpus", Doc: "labeled.conll: the corpus with its tags and the phrases"},
			{Name: "report", Kind: "report", Doc: "report.json and report.txt: the phrases added"},
		},
		Run: runCapitalizedStage,
	})
}

func runCapitalizedStage(c *stages.Context) error {
	p := c.Params
	scheme, err := corpus.ParseScheme(p.String("scheme"))
	if err != nil {
		return stages.Permanent(err)
	}
	lists, err := readNameListInputs(c)
	if err != nil {
		return err
	}
	var stop []string
	if in := c.Input("stopwords"); in != nil {
		if stop, err = readStopwordsInput(in); err != nil {
			return err
		}
	}
	text, err := dataset.ReadInput(c.Input("corpus"), p, "corpus")
	if err != nil {
		return err
	}
	spans, share, err := givenSpans(text)
	if err != nil {
		return stages.Permanent(fmt.Errorf("input corpus: %w", err))
	}
	min := p.Float("min_capital_share")
	var cp *capitalizedPhrases
	if share.reaches(min) {
		cp = &capitalizedPhrases{nameless: namelessWords(lists.Nameless(), stopwordSet(stop)), lower: lowerCounts(text), minCommon: p.Int("min_common"), heads: lists.Heads}
	}
	labeled, counts, longer, typed, err := addCapitalized(text, spans, cp, scheme)
	if err != nil {
		return stages.Permanent(fmt.Errorf("input corpus: %w", err))
	}
	rep := capitalizedReport(counts, longer, typed, p.Int("top")).withShare(share, min)
	if rep.Added {
		c.Log.Info("capitalized phrases added", "sentences", len(text.Sentences), "phrases", rep.Labeled, "distinct", rep.Distinct)
	} else {
		c.Log.Info("no capitalized phrases: the corpus does not write its entities capitalized",
			"capital", share.Capital, "entities", share.Entities, "min_capital_share", min)
	}

	out := c.Output("labeled")
	dataset.Describe(out, corpus.FormatCoNLL, scheme)
	// The phrases are added to labels that keep their name: refine.choose
	// checks it (given or refined) where the phrases follow the refinement.
	if name, ok := c.Input("corpus").Meta[dataset.MetaLabels]; ok {
		out.SetMeta(dataset.MetaLabels, name)
	}
	var buf bytes.Buffer
	if err := corpus.Write(&buf, labeled, corpus.FormatCoNLL); err != nil {
		return stages.Permanent(fmt.Errorf("writing the labeled corpus: %w", err))
	}
	if err := out.WriteFile("labeled.conll", buf.Bytes()); err != nil {
		return err
	}
	var txt bytes.Buffer
	pr := &printer{w: &txt}
	rep.writeText(pr, fmt.Sprintf("capitalized phrases added as entities of unknown type to %d sentences", len(text.Sentences)))
	if err := c.Output("report").WriteJSON("report.json", rep); err != nil {
		return err
	}
	return c.Output("report").WriteFile("report.txt", txt.Bytes())
}

// givenSpans reads the entities of each sentence from its tags, and counts
// how many of them begin with a capital letter (capitalShare).
func givenSpans(c *corpus.Corpus) ([][]corpus.Span, capitalShare, error) {
	var share capitalShare
	out := make([][]corpus.Span, len(c.Sentences))
	for i, s := range c.Sentences {
		if len(s.Tags) != len(s.Tokens) {
			return nil, share, fmt.Errorf("sentence %d: %d tokens but %d tags", i+1, len(s.Tokens), len(s.Tags))
		}
		spans, err := corpus.AnyScheme.Spans(s.Tags)
		if err != nil {
			return nil, share, fmt.Errorf("sentence %d: %w", i+1, err)
		}
		share.add(s.Tokens, spans)
		out[i] = spans
	}
	return out, share, nil
}

// addCapitalized returns c, whose sentences hold the entities spans
// (givenSpans), with the capitalized phrases between them added as
// unknown-type entities (a longer name in place of the
// entities it holds; typed where a head word ends it), its tags written in
// scheme, the phrases counted, how many of them are longer names, and how
// many a head word typed, by type. With cp nil it adds none: the tags are
// only written in scheme.
func addCapitalized(c *corpus.Corpus, given [][]corpus.Span, cp *capitalizedPhrases, scheme corpus.Scheme) (labeled *corpus.Corpus, counts map[string]int, longer int, typed map[string]int, err error) {
	counts, typed = map[string]int{}, map[string]int{}
	out := &corpus.Corpus{Sentences: make([]corpus.Sentence, len(c.Sentences))}
	for i, s := range c.Sentences {
		spans := given[i]
		var found []Match
		if cp != nil {
			found = cp.phrases(s.Tokens, spans)
		}
		all := slices.DeleteFunc(slices.Clone(spans), func(sp corpus.Span) bool { return heldBy(found, sp.Start, sp.End) })
		for _, ph := range found {
			counts[strings.Join(s.Tokens[ph.Start:ph.End], " ")]++
			if ph.Phrase == phraseLonger {
				longer++
			}
			if ph.Kind == Typed {
				typed[ph.Type]++
			}
			all = append(all, ph.span())
		}
		slices.SortFunc(all, func(a, b corpus.Span) int { return cmp.Compare(a.Start, b.Start) })
		tags, err := scheme.Tags(all, len(s.Tokens), corpus.MergeAdjacent())
		if err != nil {
			return nil, nil, 0, nil, fmt.Errorf("sentence %d: %w", i+1, err)
		}
		out.Sentences[i] = corpus.Sentence{Tokens: s.Tokens, Tags: tags, DocStart: s.DocStart}
	}
	return out, counts, longer, typed, nil
}
