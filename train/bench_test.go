package train

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/corpus"
)

// The benchmarks train and run the tagger on real sentences (the CoNLL-2003
// training split from ../shared/data, or random ones where it is absent)
// and, in the same run, a PyTorch implementation of the same architecture
// (testdata/reference_tagger.py, with Debian's python3-torch) on exactly the
// same batches, and report both throughputs, their ratio and peak memory:
//
//	go test ./train -run '^$' -bench Throughput -benchtime 1x
//
// Both sides use libtorch's default thread count of this process (reported
// as "threads"). The machine may be shared: each side is measured twice,
// interleaved, and the better run of each is kept.

const (
	benchWarmup  = 3
	benchBatches = 40
	benchRounds  = 2
)

func BenchmarkTrainThroughputTokenHead(b *testing.B) { benchThroughput(b, TokenHead, "io", LossCE) }
func BenchmarkTrainThroughputCRF(b *testing.B)       { benchThroughput(b, CRFHead, "bio", LossCRF) }

func benchCorpus(b *testing.B) *corpus.Corpus {
	dir := filepath.Join("..", "..", "shared", "data", "conll03")
	c, err := corpus.ReadTextLabels(filepath.Join(dir, "train_text.txt"), filepath.Join(dir, "train_label_true.txt"))
	if err == nil {
		return c
	}
	b.Logf("no CoNLL-2003 data (%v): random sentences", err)
	rng := rand.New(rand.NewPCG(1, 2))
	tags := []string{"O", "O", "O", "O", "O", "B-PER", "I-PER", "B-LOC", "B-ORG", "B-MISC"}
	c = &corpus.Corpus{}
	for range 5000 {
		var s corpus.Sentence
		for range 1 + rng.IntN(30) {
			w := make([]byte, 2+rng.IntN(8))
			for k := range w {
				w[k] = byte('a' + rng.IntN(26))
			}
			s.Tokens = append(s.Tokens, string(w))
			s.Tags = append(s.Tags, tags[rng.IntN(len(tags))])
		}
		c.Sentences = append(c.Sentences, s)
	}
	return c
}

// referenceResult is what the PyTorch script prints.
type referenceResult struct {
	Train   float64 `json:"train_tokens_per_sec"`
	Predict float64 `json:"predict_tokens_per_sec"`
	PeakRSS float64 `json:"peak_rss_bytes"`
	Threads int     `json:"threads"`
	Torch   string  `json:"torch"`
}

func benchThroughput(b *testing.B, head, scheme, loss string) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	python := "/usr/bin/python3"
	if _, err := exec.LookPath(python); err != nil {
		b.Skip("no /usr/bin/python3 for the PyTorch reference")
	}
	c := benchCorpus(b)
	cfg := DefaultConfig()
	cfg.Head, cfg.Scheme = head, scheme
	sch, _ := corpus.ParseScheme(scheme)
	labels, err := NewLabels(sch, []string{"PER", "LOC", "ORG", "MISC"})
	if err != nil {
		b.Fatal(err)
	}
	m, err := NewTagger(cfg, NewVocab(c, nil, MinWordCount(1)), labels, nil, 1, gotch.CPU)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	exs, err := m.encodeCorpus(c, true)
	if err != nil {
		b.Fatal(err)
	}
	batches := bucketBatches(exs, 32, rand.New(rand.NewPCG(1, 1)))[:benchWarmup+benchBatches]
	timed := batches[benchWarmup:]
	tokens := 0
	for _, ids := range timed {
		for _, id := range ids {
			tokens += exs[id].len()
		}
	}
	run := DefaultTrainConfig()
	run.Loss = loss
	spec := writeBenchSpec(b, m, exs, batches, run)

	tr, err := NewTrainer(m, run)
	if err != nil {
		b.Fatal(err)
	}
	opt, err := newAdam(m, run.MaxGradNorm)
	if err != nil {
		b.Fatal(err)
	}
	defer opt.close()
	rng := rand.New(rand.NewPCG(1, 3))
	trainGo := func(bs [][]int) time.Duration {
		start := time.Now()
		for _, ids := range bs {
			if _, _, err := tr.step(newBatch(exs, ids), exs, nil, opt, run.LearningRate, rng); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	predictGo := func(bs [][]int) time.Duration {
		out := make([]Prediction, len(exs))
		start := time.Now()
		if err := m.predictBatches(exs, bs, out); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}

	trainGo(batches[:benchWarmup])
	var best struct{ goTrain, goPredict, torchTrain, torchPredict float64 }
	var ref referenceResult
	b.ResetTimer()
	for range benchRounds {
		best.goTrain = max(best.goTrain, float64(tokens)/trainGo(timed).Seconds())
		if head == TokenHead {
			best.goPredict = max(best.goPredict, float64(tokens)/predictGo(timed).Seconds())
		}
		ref = runReference(b, python, spec)
		best.torchTrain = max(best.torchTrain, ref.Train)
		best.torchPredict = max(best.torchPredict, ref.Predict)
	}
	b.StopTimer()
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(best.goTrain, "go-train-tok/s")
	b.ReportMetric(best.torchTrain, "torch-train-tok/s")
	b.ReportMetric(best.goTrain/best.torchTrain, "train-speed-ratio")
	if head == TokenHead {
		b.ReportMetric(best.goPredict, "go-predict-tok/s")
		b.ReportMetric(best.torchPredict, "torch-predict-tok/s")
		b.ReportMetric(best.goPredict/best.torchPredict, "predict-speed-ratio")
	}
	goPeak := peakRSS()
	b.ReportMetric(goPeak/(1<<20), "go-peak-MB")
	b.ReportMetric(ref.PeakRSS/(1<<20), "torch-peak-MB")
	b.ReportMetric(float64(Threads()), "threads")
	b.Logf("%s head: %d timed batches, %d tokens, vocabulary %d words; PyTorch %s with %d thread(s)", head, len(timed), tokens, len(m.Vocab.Words), ref.Torch, ref.Threads)
}

// writeBenchSpec writes the architecture and the batches for the
// reference script.
func writeBenchSpec(b *testing.B, m *Tagger, exs []example, batches [][]int, run TrainConfig) string {
	type sentence struct {
		Words   []int64   `json:"words"`
		Chars   [][]int64 `json:"chars"`
		Casing  []int64   `json:"casing"`
		Targets []int32   `json:"targets"`
	}
	c := m.Config
	spec := map[string]any{
		"config": map[string]any{
			"words": len(m.Vocab.Words), "chars": len(m.Vocab.Chars), "casings": numCasings,
			"word_dim": c.WordDim, "char_dim": c.CharDim, "char_filters": c.CharFilters, "char_kernel": c.CharKernel,
			"casing_dim": c.CasingDim, "hidden": c.Hidden, "dropout": c.Dropout, "head": c.Head,
			"tags": m.Labels.NumTags(), "lr": run.LearningRate, "clip": run.MaxGradNorm,
		},
	}
	var bs [][]sentence
	for _, ids := range batches {
		var sents []sentence
		for _, id := range ids {
			e := exs[id]
			sents = append(sents, sentence{e.words, e.chars, e.casing, e.targets})
		}
		bs = append(bs, sents)
	}
	spec["batches"] = bs
	data, err := json.Marshal(spec)
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "batches.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		b.Fatal(err)
	}
	return path
}

func runReference(b *testing.B, python, spec string) referenceResult {
	cmd := exec.Command(python, filepath.Join("testdata", "reference_tagger.py"), spec,
		"--warmup", strconv.Itoa(benchWarmup), "--threads", strconv.Itoa(Threads()))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("PyTorch reference: %v", err)
	}
	var r referenceResult
	if err := json.Unmarshal(out, &r); err != nil {
		b.Fatalf("PyTorch reference printed %q: %v", out, err)
	}
	return r
}

// peakRSS is the process's peak resident memory (VmHWM), in bytes.
func peakRSS() float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			return kb * 1024
		}
	}
	return 0
}
