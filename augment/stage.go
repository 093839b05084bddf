package augment

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/dataset"
	"github.com/nerflow/nerflow/kit"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/train/lm"
	"github.com/nerflow/nerflow/train/tagger"
)

// Stage names.
const (
	StageLM        = "augment.lm"
	StageSentences = "augment.sentences"
)

// FormatBrown names the Brown corpus's word/TAG format for the unlabeled
// input (see lm.ReadBrown).
const FormatBrown = "brown"

// heldoutEvery: without a heldout input, every heldoutEvery-th sentence of
// the corpus is held out of training to measure perplexity.
const heldoutEvery = 50

func init() {
	m, r := lm.DefaultConfig(), lm.DefaultTrainConfig()
	params := append([]stages.Param{
		stages.IntParam("max_words", 20000, "vocabulary: the most frequent words of the training text", stages.Range(10, 1000000)),
		stages.IntParam("min_count", 2, "vocabulary: occurrences a word needs", stages.AtLeast(1)),
		stages.IntParam("dim", m.Dim, "word vector size", stages.Range(1, 4096)),
		stages.IntParam("hidden", m.Hidden, "LSTM units per direction", stages.Range(1, 8192)),
		stages.IntParam("layers", m.Layers, "LSTM layers per direction", stages.Range(1, 8)),
		stages.FloatParam("dropout", m.Dropout, "dropout on word vectors, between layers and on the top states", stages.Range(0, 0.95)),
		stages.IntParam("epochs", r.Epochs, "training epochs", stages.Range(1, 1000)),
		stages.IntParam("batch_size", r.BatchSize, "sentences per batch", stages.Range(1, 4096)),
	}, tagger.OptimizerParams(r.LearningRate, r.Warmup, r.MaxGradNorm)...)
	params = append(params, []stages.Param{
		stages.IntParam("max_len", r.MaxLen, "longer training sentences are cut", stages.Range(1, 10000)),
		stages.FloatParam("fraction", 1, "fraction of the training sentences (corpus and unlabeled) used, evenly spread: quick runs", stages.Range(0.0001, 1)),
		stages.IntParam("seed", int(r.Seed), "seed of the initial weights, batches and dropout", stages.AtLeast(0)),
	}...)
	params = append(UnlabeledParams(), params...)
	params = append(params, dataset.SourceParams("corpus", "training text")...)
	params = append(params, dataset.SourceParams("heldout", "held-out text")...)
	stages.Register(stages.Stage{
		Name:    StageLM,
		Version: 1,
		Doc: "Trains forward and backward LSTM language models on the corpus's text and unlabeled text (e.g. the " +
			"Brown corpus), reporting held-out perplexity; for RoSTER's augmentation and TagLM. Resumes from its last epoch.",
		Params: params,
		Inputs: []stages.Port{
			{Name: "corpus", Kind: "corpus", Doc: "sentences whose tokens are trained on (tags ignored)"},
			{Name: "unlabeled", Kind: "text", Many: true, Optional: true, Doc: "more text: files matching unlabeled_files, in unlabeled_format"},
			{Name: "heldout", Kind: "corpus", Optional: true, Doc: "text for perplexity (else every 50th corpus sentence is held out)"},
		},
		Outputs: []stages.Port{
			{Name: "lm", Kind: "lm", Doc: lm.ModelFile + " and " + lm.WeightsFile},
			{Name: "report", Kind: "report", Doc: "report.json: per-epoch loss, held-out perplexity of each direction, tokens/s"},
		},
		Resumable: true,
		Run:       runLMStage,
	})

	d := DefaultConfig()
	aparams := []stages.Param{
		stages.FloatParam("rate", d.Rate, "fraction of each sentence's tokens masked", stages.Range(0, 1)),
		stages.IntParam("top_k", d.TopK, "replacements are sampled from this many most likely words", stages.Range(1, 1000)),
		stages.IntParam("seed", int(d.Seed), "seed of the masks and samples", stages.AtLeast(0)),
		stages.IntParam("epoch", 0, "epoch whose augmentations to draw (each epoch has its own)", stages.AtLeast(0)),
		stages.IntParam("batch_size", d.BatchSize, "sentences per language-model batch", stages.Range(1, 4096)),
		stages.IntParam("examples", 10, "augmented sentences shown in the report", stages.AtLeast(0)),
	}
	aparams = append(aparams, dataset.SourceParams("corpus", "sentences to augment")...)
	stages.Register(stages.Stage{
		Name:    StageSentences,
		Version: 1,
		Doc: "RoSTER's contextual augmentation: masks 15% of each sentence's tokens and replaces each with a word " +
			"sampled from the top 5 of the language models' masked-word distribution, keeping the original when the " +
			"shape would change; tags unchanged.",
		Params: aparams,
		Inputs: []stages.Port{
			{Name: "lm", Kind: "lm", Accepts: []string{"encoder"}, Doc: "language models from " + StageLM + ", or an encoder from encoder.pretrain (its masked-LM head)"},
			{Name: "corpus", Kind: "corpus", Doc: "sentences to augment, with or without tags"},
		},
		Outputs: []stages.Port{
			{Name: "augmented", Kind: "corpus", Doc: "augmented.conll (tagged input) or augmented.txt, aligned with the input"},
			{Name: "report", Kind: "report", Doc: "report.json: counts and examples; report.txt: the examples"},
		},
		Run: runSentencesStage,
	})
}

// UnlabeledParams declares the parameters ReadUnlabeled reads.
func UnlabeledParams() []stages.Param {
	return []stages.Param{
		stages.StringParam("unlabeled_files", "c[a-r][0-9][0-9]", "base-name pattern of the files of the unlabeled inputs to read (the default: the Brown corpus's 500 files)"),
		stages.StringParam("unlabeled_format", FormatBrown, "format of the unlabeled files: brown (word/TAG) or a corpus format"),
	}
}

// ReadUnlabeled reads the files of a stage's inputs "unlabeled" whose
// base names match its parameter unlabeled_files, in the format of its
// parameter unlabeled_format (FormatBrown or a corpus format); it returns
// the sentences and the number of files read. The encoder's pretraining
// reads its text the same way.
func ReadUnlabeled(c *stages.Context) ([][]string, int, error) {
	pattern, format := c.Params.String("unlabeled_files"), c.Params.String("unlabeled_format")
	if _, err := path.Match(pattern, ""); err != nil {
		return nil, 0, stages.Permanent(fmt.Errorf("unlabeled_files %q: %w", pattern, err))
	}
	var out [][]string
	files := 0
	for _, in := range c.Inputs("unlabeled") {
		for _, f := range in.Files {
			if ok, _ := path.Match(pattern, path.Base(f.Name)); !ok {
				continue
			}
			files++
			rc, err := in.Open(f.Name)
			if err != nil {
				return nil, 0, err
			}
			var sents [][]string
			if format == FormatBrown {
				sents, err = lm.ReadBrown(rc, f.Name)
			} else {
				var cp *corpus.Corpus
				if cp, err = corpus.Read(rc, f.Name, corpus.Format(format)); err == nil {
					sents = cp.Tokens()
				}
			}
			rc.Close()
			if err != nil {
				return nil, 0, stages.Permanent(fmt.Errorf("input unlabeled: %w", err))
			}
			out = append(out, sents...)
		}
	}
	if len(c.Inputs("unlabeled")) > 0 && files == 0 {
		return nil, 0, stages.Permanent(fmt.Errorf("input unlabeled: no file matches unlabeled_files %q", pattern))
	}
	return out, files, nil
}

// Every keeps about fraction of the sentences, evenly spread.
func Every(sents [][]string, fraction float64) [][]string {
	if fraction >= 1 {
		return sents
	}
	var out [][]string
	acc := 0.0
	for _, s := range sents {
		if acc += fraction; acc >= 1 {
			acc--
			out = append(out, s)
		}
	}
	return out
}

func runLMStage(c *stages.Context) error {
	device, err := tagger.ParseDevice(c.Device)
	if err != nil {
		return err
	}
	p := c.Params
	text, err := dataset.ReadInput(c.Input("corpus"), p, "corpus")
	if err != nil {
		return err
	}
	trainText := text.Tokens()
	var heldout [][]string
	if in := c.Input("heldout"); in != nil {
		h, err := dataset.ReadInput(in, p, "heldout")
		if err != nil {
			return err
		}
		heldout = h.Tokens()
	} else {
		trainText = trainText[:0:0]
		for i, s := range text.Tokens() {
			if i%heldoutEvery == heldoutEvery-1 {
				heldout = append(heldout, s)
			} else {
				trainText = append(trainText, s)
			}
		}
	}
	unlabeled, files, err := ReadUnlabeled(c)
	if err != nil {
		return err
	}
	trainText, unlabeled = Every(trainText, p.Float("fraction")), Every(unlabeled, p.Float("fraction"))
	all := append(trainText, unlabeled...)
	tokens := 0
	for _, s := range all {
		tokens += len(s)
	}
	c.Log.Info("language model text", "corpus_sentences", len(trainText), "unlabeled_files", files, "unlabeled_sentences", len(unlabeled), "tokens", tokens, "heldout_sentences", len(heldout))

	cfg := lm.Config{Dim: p.Int("dim"), Hidden: p.Int("hidden"), Layers: p.Int("layers"), Dropout: p.Float("dropout")}
	run := lm.TrainConfig{Epochs: p.Int("epochs"), BatchSize: p.Int("batch_size"), LearningRate: p.Float("learning_rate"),
		Warmup: p.Float("warmup"), MaxGradNorm: p.Float("max_grad_norm"), MaxLen: p.Int("max_len"), Seed: uint64(p.Int("seed"))}
	vocab := lm.NewVocab(all, p.Int("max_words"), p.Int("min_count"))
	m, err := lm.New(cfg, vocab, run.Seed, device)
	if err != nil {
		return stages.Permanent(err)
	}
	defer m.Close()

	opts, epoch, err := kit.StageOptions(c, "language model training")
	if err != nil {
		return err
	}
	history, err := lm.Train(c, m, all, heldout, run, opts)
	if err != nil {
		return c.Failed(err)
	}
	dir := filepath.Join(c.WorkDir(), "model")
	if err := m.Save(dir); err != nil {
		return err
	}
	out := c.Output("lm")
	out.SetMeta("words", fmt.Sprint(vocab.Len()))
	if err := out.AddDir(dir); err != nil {
		return err
	}
	rep := c.Output("report")
	if last := history[len(history)-1].Heldout; last != nil {
		rep.SetMeta("perplexity_fwd", fmt.Sprintf("%.1f", last.Forward))
		rep.SetMeta("perplexity_bwd", fmt.Sprintf("%.1f", last.Backward))
	}
	return rep.WriteJSON("report.json", map[string]any{
		"model": cfg, "run": run, "vocabulary": vocab.Len(), "training_sentences": len(all), "training_tokens": tokens,
		"unlabeled_sentences": len(unlabeled), "heldout_sentences": len(heldout), "resumed_epochs": epoch, "epochs": history,
	})
}

// maskedLMs maps the file that marks a kind of model to its loader.
var (
	maskedLMsMu sync.Mutex
	maskedLMs   = map[string]func(dir string, device gotch.Device) (MaskedLM, error){}
)

// RegisterMaskedLM makes the models whose directory holds file usable as
// the lm input of augment.sentences; it panics on a duplicate. The LSTM
// language models (lm.ModelFile) are built in.
func RegisterMaskedLM(file string, load func(dir string, device gotch.Device) (MaskedLM, error)) {
	maskedLMsMu.Lock()
	defer maskedLMsMu.Unlock()
	if _, dup := maskedLMs[file]; dup || file == lm.ModelFile {
		panic("augment: masked LM file " + file + " registered twice")
	}
	maskedLMs[file] = load
}

// LoadMaskedLM loads the model in dir by the file that marks its kind:
// the LSTM language models of augment.lm, or a kind registered with
// RegisterMaskedLM (an encoder of encoder.pretrain).
func LoadMaskedLM(dir string, device gotch.Device) (MaskedLM, error) {
	if _, err := os.Stat(filepath.Join(dir, lm.ModelFile)); err == nil {
		return lm.Load(dir, device)
	}
	maskedLMsMu.Lock()
	defer maskedLMsMu.Unlock()
	for file, load := range maskedLMs {
		if _, err := os.Stat(filepath.Join(dir, file)); err == nil {
			return load(dir, device)
		}
	}
	return nil, fmt.Errorf("input lm: no %s or other known model file (is the package of its kind linked in?)", lm.ModelFile)
}

// Example is an augmented sentence next to its original, for reports.
type Example struct {
	Original  string `json:"original"`
	Augmented string `json:"augmented"`
}

func runSentencesStage(c *stages.Context) error {
	device, err := tagger.ParseDevice(c.Device)
	if err != nil {
		return err
	}
	p := c.Params
	dir, err := os.MkdirTemp(c.WorkDir(), "lm-")
	if err != nil {
		return err
	}
	if err := c.Input("lm").Fetch(dir); err != nil {
		return err
	}
	m, err := LoadMaskedLM(dir, device)
	if err != nil {
		return stages.Permanent(err)
	}
	defer m.Close()
	text, err := dataset.ReadInput(c.Input("corpus"), p, "corpus")
	if err != nil {
		return err
	}
	cfg := Config{Rate: p.Float("rate"), TopK: p.Int("top_k"), Seed: uint64(p.Int("seed")), BatchSize: p.Int("batch_size")}
	c.Progress(0, int64(len(text.Sentences)), "augmenting")
	aug, st, err := Sentences(m, text.Sentences, cfg, p.Int("epoch"))
	if err != nil {
		return stages.Permanent(err)
	}
	c.Progress(int64(len(aug)), int64(len(aug)), "augmented")
	c.Log.Info("augmented", "sentences", len(aug), "masked", st.Masked, "replaced", st.Replaced, "same", st.Same, "kept", st.Kept)

	tagged := len(aug) > 0 && aug[0].Tags != nil
	name, format := "augmented.txt", corpus.FormatText
	if tagged {
		name, format = "augmented.conll", corpus.FormatCoNLL
	}
	w, err := c.Output("augmented").Create(name)
	if err != nil {
		return err
	}
	if err := corpus.Write(w, &corpus.Corpus{Sentences: aug}, format); err != nil {
		w.Close()
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	examples := examplesOf(text.Sentences, aug, p.Int("examples"))
	var txt bytes.Buffer
	fmt.Fprintf(&txt, "%d sentences, %d tokens: %d masked, %d replaced, %d sampled the original, %d kept (shape)\n\n",
		len(aug), st.Tokens, st.Masked, st.Replaced, st.Same, st.Kept)
	for _, e := range examples {
		fmt.Fprintf(&txt, "- %s\n+ %s\n\n", e.Original, e.Augmented)
	}
	rep := c.Output("report")
	if err := rep.WriteJSON("report.json", map[string]any{"config": cfg, "epoch": p.Int("epoch"), "stats": st, "examples": examples}); err != nil {
		return err
	}
	return rep.WriteFile("report.txt", txt.Bytes())
}

// examplesOf picks up to n sentences that changed, the changed tokens in
// [brackets].
func examplesOf(orig, aug []corpus.Sentence, n int) []Example {
	var out []Example
	for i := range orig {
		if len(out) >= n {
			break
		}
		changed := false
		marked := make([]string, len(aug[i].Tokens))
		for t, w := range aug[i].Tokens {
			marked[t] = w
			if w != orig[i].Tokens[t] {
				marked[t], changed = "["+w+"]", true
			}
		}
		if changed {
			out = append(out, Example{Original: strings.Join(orig[i].Tokens, " "), Augmented: strings.Join(marked, " ")})
		}
	}
	return out
}
