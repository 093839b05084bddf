package distant

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/stages"
)

// StageName is the name of the distant labeling stage in pipeline specs.
const StageName = "distant.label"

func init() {
	stages.Register(stages.Stage{
		Name:    StageName,
		Version: 4, // 2: capitalized phrases, 3: longer names holding matches, 4: none where the entities are not capitalized
		Doc: "Labels a corpus by matching gazetteer phrases (longest first), writing tags in " +
			"IO, BIO, IOB1 or BIOES with untyped and ambiguous matches as the unknown type \"?\", " +
			"and reports coverage, frequent and ambiguous phrases and, given gold data, P/R/F1.",
		Params: append([]stages.Param{
			stages.StringParam("scheme", "bio", "tag scheme of the labels", stages.OneOf("io", "bio", "iob1", "bioes")),
			stages.StringParam("format", "conll", "format of the labeled corpus", stages.OneOf("conll", "jsonl", "jsonl-spans", "ck")),
			stages.BoolParam("entry_sentences", false, "append every typed gazetteer entry to the labeled corpus as a sentence of its own, so that a tagger trained on it learns the entries the corpus never mentions (for gazetteers of up to a few thousand entries: a large dictionary would outweigh the corpus)"),
			stages.FloatParam("entry_share", 0.5, "entry_sentences: at most this many entry sentences per sentence of the corpus; a gazetteer with more typed entries contributes an evenly spread subset of them, so that the text, where entities have context, still outweighs isolated phrases (0: every entry)", stages.Range(0, 1000)),
			abbreviationsParam(),
			stages.BoolParam("capitalized", false, "also tag with the unknown type \"?\" the runs of capitalized words inside a sentence that no gazetteer matched, less the words at their ends that name nothing (titles and common words of input names, stopwords, initials, a first word the corpus writes in lower case at least min_common times, or at all where it starts the sentence): in English running text most are names a gazetteer misses, and a tagger learns their type from context (unknown_as_entity); a run that holds matches beside such words is a longer name the gazetteer knows a part of (\"Republican State Committee\"), tagged \"?\" in their place; a phrase of two words or more that ends in a head word of input names (head:ORG Committee) has the head's type"),
			minCapitalShareParam(),
			stages.IntParam("min_common", 2, "capitalized: a phrase's first word whose lower-case form occurs this often in the corpus is a common word and left out (\"County\" beside a match)", stages.AtLeast(1)),
			stages.IntParam("top", 20, "frequent and ambiguous phrases listed in the report", stages.Range(0, 10000)),
		}, append(matchParams("label of phrases with tied types: unknown (\"?\") or o"),
			append(dataset.SourceParams("corpus", "sentences to label"), dataset.SourceParams("gold", "gold sentences")...)...)...),
		Inputs: []stages.Port{
			{Name: "corpus", Kind: "corpus", Doc: "sentences to label"},
			{Name: "gazetteers", Kind: "gazetteer", Many: true, Doc: "typed or untyped phrase lists, JSONL or CSV; every file of every artifact is a gazetteer"},
			{Name: "mined", Kind: "gazetteer", Many: true, Optional: true, Doc: "gazetteers found in this corpus itself (the person names of " + StageNames + "): they label it as the gazetteers do, but give no entry sentences, since the corpus mentions every one of them already"},
			{Name: "gold", Kind: "corpus", Optional: true, Doc: "sentences with gold tags to score the distant labels on"},
			{Name: "stopwords", Kind: "stopwords", Optional: true, Doc: "one word per line; phrases made only of them are not matched"},
			{Name: "names", Kind: "names", Many: true, Optional: true, Doc: "name lists (KIND<TAB>WORD, as " + StageNames + " reads them): with capitalized, their titles and common words (days, months) are no phrase of their own"},
		},
		Outputs: []stages.Port{
			{Name: "labeled", Kind: "corpus", Doc: "the corpus with distant tags"},
			{Name: "report", Kind: "report", Doc: "report.json and report.txt"},
		},
		Run: runStage,
	})
}

// abbreviationsParam declares abbreviations, read by the stages that label
// a whole corpus (WithAbbreviations).
func abbreviationsParam() stages.Param {
	return stages.BoolParam("abbreviations", false, "also type the abbreviations the corpus defines after a typed match, "+
		"\"nitroglycerin ( NTG )\" (Schwartz and Hearst's test; a sentence that begins with the parenthesis continues "+
		"the one before): every occurrence of the short form, matched as written, takes the long form's type where no "+
		"typed match covers it; a short form defined with several types is left out")
}

// matchParams are the params of a labeling stage that compile its matcher
// (stageMatcher), with the doc of the param ambiguous, which each stage
// reads its own way.
func matchParams(ambiguousDoc string) []stages.Param {
	return []stages.Param{
		stages.StringParam("case", "exact", "letter case matching: exact, fold, or variants (as written, UPPER, lower)", stages.OneOf("exact", "fold", "variants")),
		stages.StringParam("unicode", "none", "Unicode normalization of phrases and tokens", stages.OneOf("none", "nfc", "nfkc")),
		stages.StringParam("ambiguous", "unknown", ambiguousDoc, stages.OneOf("unknown", "o")),
		stages.StringParam("untyped", "unknown", "label of untyped phrases: unknown (\"?\") or o", stages.OneOf("unknown", "o")),
		stages.StringParam("tokenizer", "whitespace", "how gazetteer phrases are split into tokens", stages.OneOf("whitespace", "punct")),
		stages.IntListParam("priorities", nil, "priority of each gazetteer input, in order (missing ones are 0); higher wins type conflicts"),
		stages.StringListParam("types", nil, "type given to the untyped phrases of each gazetteer input, in order (empty: unknown type)"),
	}
}

func runStage(c *stages.Context) error {
	p := c.Params
	scheme, err := corpus.ParseScheme(p.String("scheme"))
	if err != nil {
		return stages.Permanent(err)
	}
	var caps *Capitalized
	if p.Bool("capitalized") {
		lists, err := readNameListInputs(c)
		if err != nil {
			return err
		}
		caps = &Capitalized{Nameless: lists.Nameless(), MinCommon: p.Int("min_common"), Heads: lists.Heads, MinShare: p.Float("min_capital_share")}
	} else if len(c.Inputs("names")) > 0 {
		return stages.Permanent(fmt.Errorf("input names: only capitalized reads it; set capitalized: true or disconnect it"))
	}
	m, gazetteers, err := stageMatcher(c, c.Inputs("mined"), WithTopK(p.Int("top")), WithAbbreviations(p.Bool("abbreviations")), WithCapitalized(caps))
	if err != nil {
		return err
	}
	text, err := dataset.ReadInput(c.Input("corpus"), p, "corpus")
	if err != nil {
		return err
	}
	var gold *corpus.Corpus
	if in := c.Input("gold"); in != nil {
		if gold, err = dataset.ReadInput(in, p, "gold"); err != nil {
			return err
		}
	}
	c.Progress(0, int64(len(text.Sentences)), "labeling")
	labeled, report, err := m.Run(text, gold, scheme)
	if err != nil {
		return stages.Permanent(err)
	}
	c.Progress(int64(len(text.Sentences)), int64(len(text.Sentences)), "labeled")
	for _, w := range report.Warnings {
		c.Log.Warn(w)
	}
	c.Log.Info("distant labels", "sentences", report.Sentences, "tokens", report.Tokens,
		"coverage", report.Coverage, "unknown_coverage", report.UnknownCoverage)
	if cr := report.Capitalized; cr != nil && !cr.Added {
		c.Log.Info("no capitalized phrases: the corpus does not write its entities capitalized",
			"capital", cr.Capital, "entities", cr.Entities, "min_capital_share", cr.MinShare)
	}
	if p.Bool("entry_sentences") {
		// After the report: its coverage and scores are the corpus's. The
		// mined gazetteers give none: a name the corpus holds, repeated
		// without its context, only taught the taggers that a lone
		// capitalized word is a person (on the sample, with the surnames
		// of its names: test PER precision 61.9 against the labels' 81.8).
		entries, err := m.EntrySentences(gazetteers, scheme)
		if err != nil {
			return stages.Permanent(err)
		}
		typed := len(entries.Sentences)
		if share := p.Float("entry_share"); share > 0 {
			entries.Sentences = Spread(entries.Sentences, int(share*float64(len(text.Sentences))))
		}
		labeled.Sentences = append(labeled.Sentences, entries.Sentences...)
		c.Log.Info("appended gazetteer entries as sentences", "sentences", len(entries.Sentences), "typed_entries", typed)
	}

	format := corpus.Format(p.String("format"))
	out := c.Output("labeled")
	dataset.Describe(out, format, scheme)
	w, err := out.Create("labeled." + strings.ReplaceAll(string(format), "-spans", ""))
	if err != nil {
		return err
	}
	if err := corpus.Write(w, labeled, format); err != nil {
		w.Close()
		return stages.Permanent(fmt.Errorf("writing the labeled corpus: %w", err))
	}
	if err := w.Close(); err != nil {
		return err
	}
	var txt bytes.Buffer
	if err := report.WriteText(&txt); err != nil {
		return err
	}
	if err := c.Output("report").WriteJSON("report.json", report); err != nil {
		return err
	}
	return c.Output("report").WriteFile("report.txt", txt.Bytes())
}

// stageMatcher compiles the matcher of a labeling stage from its input
// gazetteers and the gazetteer artifacts mined after them (priority 0),
// its stopwords and matching params; it returns the input gazetteers'
// gazetteers too. A malformed gazetteer is a permanent error naming its
// file and line.
func stageMatcher(c *stages.Context, mined []*stages.Input, more ...Option) (*Matcher, []*Gazetteer, error) {
	opts, err := stageOptions(c)
	if err != nil {
		return nil, nil, err
	}
	opts = append(opts, more...)
	gazetteers, err := readGazetteers(c.Inputs("gazetteers"), c.Params.Ints("priorities"), c.Params.Strings("types"), opts...)
	if err != nil {
		return nil, nil, err
	}
	found, err := readGazetteers(mined, nil, nil, opts...)
	if err != nil {
		return nil, nil, err
	}
	m, err := NewMatcher(slices.Concat(gazetteers, found), opts...)
	if err != nil {
		return nil, nil, stages.Permanent(err)
	}
	return m, gazetteers, nil
}

// stageOptions reads the matching params (matchParams) and the stopwords
// input of a stage into options.
func stageOptions(c *stages.Context) ([]Option, error) {
	p := c.Params
	opts, err := ParseOptions(p.String("case"), p.String("unicode"), p.String("untyped"), p.String("ambiguous"), p.String("tokenizer"))
	if err != nil {
		return nil, stages.Permanent(err)
	}
	if in := c.Input("stopwords"); in != nil {
		words, err := readStopwordsInput(in)
		if err != nil {
			return nil, err
		}
		opts = append(opts, WithStopwords(words))
	}
	return opts, nil
}

// readStopwordsInput reads every file of a stopwords input, a word a line.
func readStopwordsInput(in *stages.Input) ([]string, error) {
	var words []string
	for _, f := range in.Files {
		err := readInput(in, f.Name, func(r io.Reader) error {
			w, err := readLines(r)
			words = append(words, w...)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return words, nil
}

// readGazetteers reads every file of every artifact ins, the i-th
// artifact's with priorities[i] and types[i] where given; a malformed
// gazetteer is a permanent error.
func readGazetteers(ins []*stages.Input, priorities []int, types []string, opts ...Option) ([]*Gazetteer, error) {
	var gazetteers []*Gazetteer
	for i, in := range ins {
		src := Source{}
		if i < len(priorities) {
			src.Priority = priorities[i]
		}
		if i < len(types) {
			src.Type = types[i]
		}
		for _, f := range in.Files {
			src.Path = f.Name
			err := readInput(in, f.Name, func(r io.Reader) error {
				g, err := Read(r, src, opts...)
				if err != nil {
					return stages.Permanent(err)
				}
				gazetteers = append(gazetteers, g)
				return nil
			})
			if err != nil {
				return nil, err
			}
		}
	}
	return gazetteers, nil
}

// readInput opens one file of an input artifact for read.
func readInput(in *stages.Input, name string, read func(io.Reader) error) error {
	rc, err := in.Open(name)
	if err != nil {
		return err
	}
	defer rc.Close()
	return read(rc)
}

// ParseOptions turns the textual settings of the command and the stage
// into options.
func ParseOptions(caseMode, unicodeForm, untyped, ambiguous, tokenizer string) ([]Option, error) {
	cm, err := ParseCaseMode(caseMode)
	if err != nil {
		return nil, err
	}
	uf, err := ParseUnicodeForm(unicodeForm)
	if err != nil {
		return nil, err
	}
	ut, err := ParseUncertain(untyped)
	if err != nil {
		return nil, fmt.Errorf("untyped: %w", err)
	}
	am, err := ParseUncertain(ambiguous)
	if err != nil {
		return nil, fmt.Errorf("ambiguous: %w", err)
	}
	tk, err := ParseTokenizer(tokenizer)
	if err != nil {
		return nil, err
	}
	return []Option{WithCase(cm), WithUnicodeForm(uf), WithUntyped(ut), WithAmbiguous(am), WithTokenizer(tk)}, nil
}

// minCapitalShareParam declares the share of a corpus's typed entities that
// must begin with a capital letter for its capitalized phrases to be added
// (Capitalized.MinShare).
func minCapitalShareParam() stages.Param {
	return stages.FloatParam("min_capital_share", DefaultMinCapitalShare, "capitalized: the phrases are added only where at least this share of the corpus's typed entities, beside a sentence's first word, begin with a capital letter (the report says how many do): a text that writes its entities in lower case, as BC5CDR's chemicals and diseases, capitalizes sentence starts, abbreviations and other names, not the ones it misses (0: always)",
		stages.Range(0, 1))
}
