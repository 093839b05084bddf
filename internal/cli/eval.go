package cli

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/eval"
)

type evalFlags struct {
	gold, pred string
	scheme     string
	format     string
	types      []string
	jsonOut    string
}

func init() {
	register(func(a *app) *cobra.Command {
		var f evalFlags
		cmd := &cobra.Command{
			Use:   "eval --gold FILE --pred FILE",
			Short: "Score predicted entity tags against gold tags (conlleval semantics)",
			Long: `eval reads gold and predicted tags, aligned sentence by sentence and token by
token, and prints entity-level precision, recall and F1 (micro-averaged and
per entity type) and token accuracy, reading entities from the tags the way
the CoNLL script conlleval does: an I- tag after O or after another type
starts a new entity, and an entity counts as correct only with exactly the
gold boundaries and type.

Each file may be a labels file (.txt: one sentence of tags per line, as
train_label_true.txt) or any corpus format (.conll, .bio, .tsv, .jsonl, .ck,
optionally .gz); --format overrides the detection for both files.`,
			Example: `  nerflow eval --gold data/conll03/train_label_true.txt --pred data/conll03/train_label_dist.txt
  nerflow eval --gold dev.conll --pred pred.conll --scheme bioes --json scores.json`,
			Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				return runEval(cmd.OutOrStdout(), a.log, f)
			},
		}
		fl := cmd.Flags()
		fl.StringVar(&f.gold, "gold", "", "file with the gold tags (required)")
		fl.StringVar(&f.pred, "pred", "", "file with the predicted tags (required)")
		fl.StringVar(&f.scheme, "scheme", "bio", "tag scheme of both files: bio (iob2), iob1, io or bioes (iobes)")
		fl.StringVar(&f.format, "format", "", "format of both files: "+strings.Join(corpus.Formats(), ", ")+" (default: from the extension, .txt meaning labels)")
		fl.StringSliceVar(&f.types, "types", nil, "accepted entity types, comma-separated (default: any)")
		fl.StringVar(&f.jsonOut, "json", "", "also write the report as JSON to this file")
		for _, name := range []string{"gold", "pred"} {
			if err := cmd.MarkFlagRequired(name); err != nil {
				panic(err)
			}
		}
		return cmd
	})
}

func runEval(out io.Writer, log *slog.Logger, f evalFlags) error {
	scheme, err := corpus.ParseScheme(f.scheme)
	if err != nil {
		return err
	}
	opts := []corpus.Option{corpus.WithScheme(scheme)}
	if len(f.types) > 0 {
		opts = append(opts, corpus.WithTypes(f.types...))
	}
	gold, err := dataset.ScanTags(f.gold, corpus.Format(f.format), opts...)
	if err != nil {
		return err
	}
	defer gold.Close()
	pred, err := dataset.ScanTags(f.pred, corpus.Format(f.format), opts...)
	if err != nil {
		return err
	}
	defer pred.Close()

	report, err := scoreAligned(gold, pred, f.gold, f.pred, scheme)
	if err != nil {
		return err
	}
	if err := report.WriteTable(out); err != nil {
		return err
	}
	if f.jsonOut != "" {
		if err := writeJSONFile(f.jsonOut, "the JSON report", report); err != nil {
			return err
		}
		log.Info("wrote evaluation report", "path", f.jsonOut)
	}
	return nil
}

// line up is an error naming both places.
func scoreAligned(gold, pred *corpus.Scanner, goldName, predName string, scheme corpus.Scheme) (eval.Report, error) {
	scorer := eval.NewScorer(scheme)
	for n := 1; ; n++ {
		gok, pok := gold.Scan(), pred.Scan()
		if err := gold.Err(); err != nil {
			return eval.Report{}, err
		}
		if err := pred.Err(); err != nil {
			return eval.Report{}, err
		}
		switch {
		case !gok && !pok:
			return scorer.Report(), nil
		case !pok:
			return eval.Report{}, fmt.Errorf("%s: ends after %d sentences, but %s:%d holds sentence %d", predName, n-1, goldName, gold.Line(), n)
		case !gok:
			return eval.Report{}, fmt.Errorf("%s: ends after %d sentences, but %s:%d holds sentence %d", goldName, n-1, predName, pred.Line(), n)
		}
		g, p := gold.Sentence(), pred.Sentence()
		gAt, pAt := fmt.Sprintf("%s:%d", goldName, gold.Line()), fmt.Sprintf("%s:%d", predName, pred.Line())
		if g.Tags == nil {
			return eval.Report{}, fmt.Errorf("%s: sentence %d has no tags", gAt, n)
		}
		if p.Tags == nil {
			return eval.Report{}, fmt.Errorf("%s: sentence %d has no tags", pAt, n)
		}
		if len(g.Tags) != len(p.Tags) {
			return eval.Report{}, fmt.Errorf("%s: sentence %d has %d tags but %s has %d", pAt, n, len(p.Tags), gAt, len(g.Tags))
		}
		if g.Tokens != nil && p.Tokens != nil {
			for i := range g.Tokens {
				if g.Tokens[i] != p.Tokens[i] {
					return eval.Report{}, fmt.Errorf("%s: sentence %d token %d is %q but %s has %q: the files are not aligned", pAt, n, i+1, p.Tokens[i], gAt, g.Tokens[i])
				}
			}
		}
		if err := scorer.Add(g.Tags, p.Tags); err != nil {
			return eval.Report{}, fmt.Errorf("%s and %s: sentence %d: %w", gAt, pAt, n, err)
		}
	}
}
