package cli

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/distant"
)

type distantFlags struct {
	corpus, corpusFormat          string
	gazetteers                    []string
	out, outFormat, outLabels     string
	gold, goldFormat, goldLabels  string
	scheme, caseMode, unicode     string
	untyped, ambiguous, tokenizer string
	stopwords                     string
	names                         []string
	namesMinCommon                int
	top                           int
	abbreviations                 bool
	capitalized                   bool
	minCapitalShare               float64
	reportPath                    string
}

func init() {
	register(func(a *app) *cobra.Command {
		var f distantFlags
		cmd := &cobra.Command{
			Use:   "distant --corpus FILE --gazetteer FILE [--gazetteer FILE ...] --out FILE [--gold FILE]",
			Short: "Label a corpus by matching gazetteers (distant supervision) and report on the labels",
			Long: `distant matches every gazetteer phrase in the corpus in one pass, keeps the
longest matches where they overlap, and writes the corpus with the resulting
tags (--scheme io, bio, iob1 or bioes). The report on stdout gives the
number of matches per type, the share of tokens and sentences covered, the
most frequent and the ambiguous phrases.

A gazetteer is a typed list (Type<TAB>phrase per line), an untyped list (one
phrase per line: entity-like phrases of unknown type), JSONL
({"phrase": ..., "type": ..., "aliases": [...]}) or CSV with a header naming
a phrase column and optionally type and aliases columns. Options follow the
path after commas: priority=N (a higher priority wins when gazetteers give a
phrase different types; default 0), type=T (the type of untyped phrases) and
format=typed|untyped|jsonl|csv. Matches of untyped phrases, and of phrases
whose types tie, are tagged with the unknown type "?" (training ignores its
type); --untyped o and --ambiguous o tag them O instead.

--abbreviations also types the short forms the corpus defines after a typed
match, "nitroglycerin ( NTG )" (Schwartz and Hearst's test): every NTG of the
corpus, matched as written, takes the long form's type where no typed match
covers it; the report lists them. The methods on gazetteers turn it on.

--gold FILE labels the gold file's sentences with the same matcher and
scores the distant labels against the gold tags (conlleval semantics; "?"
spans count as O). The gold sentences need not be in the corpus: a dev set
that is a subset of the corpus, or held out from it, is scored as it is.

Corpus formats are detected from the extension (.txt: one sentence per
line; .conll, .bio, .tsv: one token per line; .jsonl; .ck) or named with
--corpus-format; a file of one token per line with blank lines between
sentences, such as AutoNER's raw_text.txt, is read with --corpus-format conll.`,
			Example: `  nerflow distant --corpus data/bc5cdr/raw_text.txt --corpus-format conll \
    --gazetteer data/bc5cdr/dict_core.txt --gazetteer data/bc5cdr/dict_full.txt \
    --stopwords data/bc5cdr/stopwords.txt --case variants \
    --gold data/bc5cdr/truth_dev.ck --out distant.conll --report report.json
  nerflow distant --corpus train_text.txt --gazetteer people.csv,priority=2 \
    --gazetteer places.txt,type=LOC --scheme io --out train.conll`,
			Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				return runDistant(cmd.OutOrStdout(), a.log, f)
			},
		}
		fl := cmd.Flags()
		fl.StringVar(&f.corpus, "corpus", "", "corpus to label (required)")
		fl.StringVar(&f.corpusFormat, "corpus-format", "", "corpus format: "+strings.Join(corpus.Formats(), ", ")+" (default: from the extension)")
		fl.StringArrayVar(&f.gazetteers, "gazetteer", nil, "gazetteer PATH[,priority=N][,type=T][,format=F]; repeat for several (required)")
		fl.StringVar(&f.out, "out", "", "labeled corpus to write (required)")
		fl.StringVar(&f.outFormat, "out-format", "", "format of --out (default: from the extension)")
		fl.StringVar(&f.outLabels, "out-labels", "", "with a text --out: file for the tags, one sentence per line")
		fl.StringVar(&f.gold, "gold", "", "sentences with gold tags to score the distant labels on")
		fl.StringVar(&f.goldFormat, "gold-format", "", "format of --gold (default: from the extension)")
		fl.StringVar(&f.goldLabels, "gold-labels", "", "with a text --gold: its labels file, one sentence of tags per line")
		fl.StringVar(&f.scheme, "scheme", "bio", "tag scheme of the labels: io, bio (iob2), iob1 or bioes (iobes)")
		fl.StringVar(&f.caseMode, "case", "exact", "letter case: exact, fold (ignore case) or variants (as written, UPPER or lower; no lower form for phrases with a stopword)")
		fl.StringVar(&f.unicode, "unicode", "none", "Unicode normalization of phrases and tokens: none, nfc or nfkc")
		fl.StringVar(&f.untyped, "untyped", "unknown", `label of untyped phrases: unknown ("?") or o (they then only keep typed matches out of longer names)`)
		fl.StringVar(&f.ambiguous, "ambiguous", "unknown", `label of phrases whose types tie: unknown ("?") or o`)
		fl.StringVar(&f.tokenizer, "tokenizer", "whitespace", "how gazetteer phrases are split: whitespace, or punct (punctuation marks are tokens)")
		fl.StringVar(&f.stopwords, "stopwords", "", "file of stopwords, one per line: phrases made only of them are not matched")
		fl.StringArrayVar(&f.names, "names", nil, "name list (first<TAB>Name, title<TAB>Title lines; e.g. examples/data/names/names.tsv): the person names it finds in --corpus label it as PER beside the gazetteers, as stage "+distant.StageNames+" does; repeatable")
		fl.IntVar(&f.namesMinCommon, "names-min-common", 2, "with --names: a word whose lower-case form occurs this often in the corpus starts no name and ends one; with --capitalized, starts no phrase")
		fl.Float64Var(&f.minCapitalShare, "min-capital-share", distant.DefaultMinCapitalShare, "with --capitalized: add the phrases only where at least this share of the labels' typed entities, beside a sentence's first word, begin with a capital letter (0: always)")
		fl.BoolVar(&f.capitalized, "capitalized", false, `also tag with the unknown type "?" the capitalized phrases inside a sentence that no gazetteer matched, less titles and common words of the --names lists, stopwords, initials and a first word --corpus writes in lower case (--names-min-common times; at all at a sentence start), as stage `+distant.StageName+` does with capitalized: true; with --gold, the report counts how many are exactly a gold entity`)
		fl.BoolVar(&f.abbreviations, "abbreviations", false, `also type the abbreviations the corpus defines after a typed match ("nitroglycerin ( NTG )"): every NTG of the corpus, as written, takes the long form's type where no typed match covers it`)
		fl.IntVar(&f.top, "top", 20, "frequent and ambiguous phrases to list")
		fl.StringVar(&f.reportPath, "report", "", "also write the report as JSON to this file")
		for _, name := range []string{"corpus", "gazetteer", "out"} {
			if err := cmd.MarkFlagRequired(name); err != nil {
				panic(err)
			}
		}
		return cmd
	})
}

func runDistant(out io.Writer, log *slog.Logger, f distantFlags) error {
	scheme, err := corpus.ParseScheme(f.scheme)
	if err != nil {
		return err
	}
	opts, err := distant.ParseOptions(f.caseMode, f.unicode, f.untyped, f.ambiguous, f.tokenizer)
	if err != nil {
		return err
	}
	opts = append(opts, distant.WithTopK(f.top), distant.WithAbbreviations(f.abbreviations))
	if f.stopwords != "" {
		words, err := distant.ReadStopwords(f.stopwords)
		if err != nil {
			return err
		}
		opts = append(opts, distant.WithStopwords(words))
	}
	var gazetteers []*distant.Gazetteer
	for _, spec := range f.gazetteers {
		src, err := distant.ParseSource(spec)
		if err != nil {
			return err
		}
		g, err := distant.Load(src, opts...)
		if err != nil {
			return err
		}
		r := g.Report
		log.Info("loaded gazetteer", "path", src.Path, "format", r.Format, "entries", r.Entries,
			"duplicates", r.Duplicates.Count, "conflicts", r.Conflicts.Count, "empty", r.Empty.Count, "no_tokens", r.NoTokens.Count)
		gazetteers = append(gazetteers, g)
	}

	text, err := readCorpusFlag(f.corpus, f.corpusFormat, "")
	if err != nil {
		return err
	}
	if isTextFormat(f.corpus, f.corpusFormat) && looksTokenPerLine(text) {
		log.Warn("every sentence has a single token: if the file has one token per line with blank lines between sentences, read it with --corpus-format conll",
			"path", f.corpus)
	}
	lists, err := readNameListFlags(f.names)
	if err != nil {
		return err
	}
	if len(f.names) > 0 {
		lists.DropTypedOtherwise(gazetteers)
		g, err := distant.MineNames(text, lists, f.namesMinCommon).Gazetteer("person names found in "+f.corpus, opts...)
		if err != nil {
			return err
		}
		log.Info("found person names", "names", g.Report.Entries, "lists", strings.Join(f.names, ","))
		gazetteers = append(gazetteers, g)
	}
	if f.capitalized {
		if f.minCapitalShare < 0 || f.minCapitalShare > 1 {
			return fmt.Errorf("--min-capital-share %g: want a share from 0 to 1", f.minCapitalShare)
		}
		opts = append(opts, distant.WithCapitalized(&distant.Capitalized{Nameless: lists.Nameless(), MinCommon: f.namesMinCommon, Heads: lists.Heads, MinShare: f.minCapitalShare}))
	}
	var gold *corpus.Corpus
	if f.gold != "" {
		if gold, err = readCorpusFlag(f.gold, f.goldFormat, f.goldLabels); err != nil {
			return err
		}
		for i, s := range gold.Sentences {
			if s.Tags == nil {
				return fmt.Errorf("%s: sentence %d has no tags; a gold file needs them (a text file takes --gold-labels)", f.gold, i+1)
			}
		}
	}

	labeled, report, err := distant.Run(text, gazetteers, gold, scheme, opts...)
	if err != nil {
		return err
	}
	if report.Gold != nil {
		report.Gold.Source = f.gold
	}
	if err := writeLabeled(f, labeled); err != nil {
		return err
	}
	log.Info("wrote distant labels", "path", f.out, "sentences", report.Sentences, "tokens", report.Tokens)
	if err := report.WriteText(out); err != nil {
		return err
	}
	if f.reportPath != "" {
		if err := writeJSONFile(f.reportPath, "the report", report); err != nil {
			return err
		}
		log.Info("wrote report", "path", f.reportPath)
	}
	return nil
}

// readNameListFlags reads the --names lists.
func readNameListFlags(paths []string) (distant.NameLists, error) {
	var lists distant.NameLists
	for _, path := range paths {
		r, err := os.Open(path)
		if err != nil {
			return lists, fmt.Errorf("name list: %w", err)
		}
		err = distant.ReadNameLists(r, path, &lists)
		r.Close()
		if err != nil {
			return lists, err
		}
	}
	return lists, nil
}

// readCorpusFlag reads a corpus file in the named or detected format; a
// text file takes its tags from labels when given.
func readCorpusFlag(path, format, labels string) (*corpus.Corpus, error) {
	return dataset.Source{File: path, Labels: labels, Format: corpus.Format(format)}.ReadFile()
}

// isTextFormat reports whether a corpus file is read in the text format.
func isTextFormat(path, format string) bool {
	if format != "" {
		return strings.EqualFold(format, string(corpus.FormatText))
	}
	f, err := corpus.DetectFormat(path)
	return err == nil && f == corpus.FormatText
}

// looksTokenPerLine reports whether a corpus read as text has only
// one-token sentences: the mark of a one-token-per-line file read as one
// sentence per line.
func looksTokenPerLine(c *corpus.Corpus) bool {
	if len(c.Sentences) < 2 {
		return false
	}
	for _, s := range c.Sentences {
		if len(s.Tokens) != 1 {
			return false
		}
	}
	return true
}

func writeLabeled(f distantFlags, c *corpus.Corpus) error {
	var opts []corpus.Option
	format := corpus.Format(f.outFormat)
	if format != "" {
		var err error
		if format, err = corpus.ParseFormat(f.outFormat); err != nil {
			return err
		}
		opts = append(opts, corpus.WithFormat(format))
	} else if d, err := corpus.DetectFormat(f.out); err == nil {
		format = d
	}
	if format == corpus.FormatText {
		if f.outLabels == "" {
			return fmt.Errorf("%s: a text file holds no tags; give --out-labels for them, or write another format (.conll, .jsonl)", f.out)
		}
		return corpus.WriteTextLabels(f.out, f.outLabels, c)
	}
	if f.outLabels != "" {
		return fmt.Errorf("--out-labels goes with a text --out, not with format %s", format)
	}
	return corpus.WriteFile(f.out, c, opts...)
}
