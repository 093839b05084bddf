package distant

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/stages"
)

// StageName is the name of the distant labeling stage in pipeline specs.
const StageName = "distant.label"

func init() {
	stages.Register(stages.Stage{
		Name:    StageName,
		Version: 1,
		Doc: "Labels a corpus by matching gazetteer phrases (longest first), writing tags in " +
			"IO, BIO, IOB1 or BIOES with untyped and ambiguous matches as the unknown type \"?\", " +
			"and reports coverage, frequent and ambiguous phrases and, given gold data, P/R/F1.",
		Params: []stages.Param{
			stages.StringParam("scheme", "bio", "tag scheme of the labels", stages.OneOf("io", "bio", "iob1", "bioes")),
			stages.StringParam("case", "exact", "letter case matching: exact, fold, or variants (as written, UPPER, lower)", stages.OneOf("exact", "fold", "variants")),
			stages.StringParam("unicode", "none", "Unicode normalization of phrases and tokens", stages.OneOf("none", "nfc", "nfkc")),
			stages.StringParam("ambiguous", "unknown", "label of phrases with tied types: unknown (\"?\") or o", stages.OneOf("unknown", "o")),
			stages.StringParam("untyped", "unknown", "label of untyped phrases: unknown (\"?\") or o", stages.OneOf("unknown", "o")),
			stages.StringParam("tokenizer", "whitespace", "how gazetteer phrases are split into tokens", stages.OneOf("whitespace", "punct")),
			stages.IntListParam("priorities", nil, "priority of each gazetteer input, in order (missing ones are 0); higher wins type conflicts"),
			stages.StringListParam("types", nil, "type given to the untyped phrases of each gazetteer input, in order (empty: unknown type)"),
			stages.StringParam("corpus_format", "", "format of the corpus file (empty: from its name)"),
			stages.StringParam("gold_format", "", "format of the gold file (empty: from its name)"),
			stages.StringParam("format", "conll", "format of the labeled corpus", stages.OneOf("conll", "jsonl", "jsonl-spans", "ck")),
			stages.IntParam("top", 20, "frequent and ambiguous phrases listed in the report", stages.Range(0, 10000)),
		},
		Inputs: []stages.Port{
			{Name: "corpus", Kind: "corpus", Doc: "sentences to label (one file)"},
			{Name: "gazetteers", Kind: "gazetteer", Many: true, Doc: "typed or untyped phrase lists, JSONL or CSV; every file of every artifact is a gazetteer"},
			{Name: "gold", Kind: "corpus", Optional: true, Doc: "sentences with gold tags to score the distant labels on (one file)"},
			{Name: "stopwords", Kind: "stopwords", Optional: true, Doc: "one word per line; phrases made only of them are not matched"},
		},
		Outputs: []stages.Port{
			{Name: "labeled", Kind: "corpus", Doc: "the corpus with distant tags"},
			{Name: "report", Kind: "report", Doc: "report.json and report.txt"},
		},
		Run: runStage,
	})
}

func runStage(c *stages.Context) error {
	p := c.Params
	scheme, err := corpus.ParseScheme(p.String("scheme"))
	if err != nil {
		return stages.Permanent(err)
	}
	opts, err := ParseOptions(p.String("case"), p.String("unicode"), p.String("untyped"), p.String("ambiguous"), p.String("tokenizer"))
	if err != nil {
		return stages.Permanent(err)
	}
	opts = append(opts, WithTopK(p.Int("top")))
	if in := c.Input("stopwords"); in != nil {
		var words []string
		for _, f := range in.Files {
			err := readInput(in, f.Name, func(r io.Reader) error {
				w, err := readLines(r)
				words = append(words, w...)
				return err
			})
			if err != nil {
				return err
			}
		}
		opts = append(opts, WithStopwords(words))
	}

	priorities, types := p.Ints("priorities"), p.Strings("types")
	var gazetteers []*Gazetteer
	for i, in := range c.Inputs("gazetteers") {
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
				return err
			}
		}
	}

	text, err := readCorpus(c.Input("corpus"), p.String("corpus_format"))
	if err != nil {
		return err
	}
	var gold *corpus.Corpus
	if in := c.Input("gold"); in != nil {
		if gold, err = readCorpus(in, p.String("gold_format")); err != nil {
			return err
		}
	}
	c.Progress(0, int64(len(text.Sentences)), "labeling")
	labeled, report, err := Run(text, gazetteers, gold, scheme, opts...)
	if err != nil {
		return stages.Permanent(err)
	}
	c.Progress(int64(len(text.Sentences)), int64(len(text.Sentences)), "labeled")
	for _, w := range report.Warnings {
		c.Log.Warn(w)
	}
	c.Log.Info("distant labels", "sentences", report.Sentences, "tokens", report.Tokens,
		"coverage", report.Coverage, "unknown_coverage", report.UnknownCoverage)

	format := corpus.Format(p.String("format"))
	out := c.Output("labeled")
	out.SetMeta("scheme", scheme.String())
	out.SetMeta("format", string(format))
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

// readInput opens one file of an input artifact for read.
func readInput(in *stages.Input, name string, read func(io.Reader) error) error {
	rc, err := in.Open(name)
	if err != nil {
		return err
	}
	defer rc.Close()
	return read(rc)
}

// readCorpus reads the one file of a corpus artifact.
func readCorpus(in *stages.Input, format string) (*corpus.Corpus, error) {
	if len(in.Files) != 1 {
		return nil, stages.Permanent(fmt.Errorf("corpus artifact %s has %d files; want one", in.Digest, len(in.Files)))
	}
	name := in.Files[0].Name
	f := corpus.Format(format)
	if f == "" {
		var err error
		if f, err = corpus.DetectFormat(name); err != nil {
			return nil, stages.Permanent(err)
		}
	}
	var c *corpus.Corpus
	err := readInput(in, name, func(r io.Reader) error {
		var err error
		if c, err = corpus.Read(r, name, f); err != nil {
			return stages.Permanent(err)
		}
		return nil
	})
	return c, err
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
