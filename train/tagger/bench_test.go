package tagger

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/kit"
)

// The benchmarks train and run the tagger on real sentences (the CoNLL-2003
// training split from ../shared/data, or random ones where it is absent)
// and, in the same run, a PyTorch implementation of the same architecture
// (testdata/reference_tagger.py, with Debian's python3-torch) on exactly the
// same batches, and report both throughputs, their ratios and peak memory:
//
//	go test ./train -run '^$' -bench Throughput -benchtime 1x
//
// Each runs at 1 libtorch thread and at all cores (sub-benchmarks
// threads=N), both sides alike. The reference is one Python process that
// sets up once and times a round whenever asked, so the two sides take
// turns seconds apart; each round gives a ratio, and the benchmark
// reports their median (*-ratio), their minimum (*-ratio-min) and the
// median by CPU time (*-cpu-ratio: tokens per CPU-second, which other
// processes' load disturbs less). On this project's VM single rounds move by
// 10-25%; the median of paired rounds moves by a few percent. The
// environment can change the run (the GPU build kit uses it):
//
//	NERFLOW_BENCH_DATA     directory with train_text.txt and train_label_true.txt
//	NERFLOW_BENCH_DEVICE   cpu (default) or cuda:N, for both sides
//	NERFLOW_BENCH_BATCH    sentences per batch (default 32)
//	NERFLOW_BENCH_STEPS    timed batches per round (default 40)
//	NERFLOW_BENCH_ROUNDS   rounds, each Go then PyTorch (default 5)
//	NERFLOW_BENCH_THREADS  comma-separated thread counts (default 1 and all cores)
//	NERFLOW_BENCH_PYTHON   the Python with torch (default /usr/bin/python3)

const benchWarmup = 3

func BenchmarkTrainThroughputTokenHead(b *testing.B) { benchThroughput(b, TokenHead, "io", LossCE) }
func BenchmarkTrainThroughputCRF(b *testing.B)       { benchThroughput(b, CRFHead, "bio", LossCRF) }

func benchEnvInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

func benchCorpus(b *testing.B) *corpus.Corpus {
	dir := os.Getenv("NERFLOW_BENCH_DATA")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "data", "conll03")
	}
	c, err := corpus.ReadTextLabels(filepath.Join(dir, "train_text.txt"), filepath.Join(dir, "train_label_true.txt"))
	if err == nil {
		return c
	}
	b.Logf("no CoNLL-2003 data (%v): random sentences", err)
	rng := rand.New(rand.NewPCG(1, 2))
	tags := []string{"O", "O", "O", "O", "O", "B-PER", "I-PER", "B-LOC", "B-ORG", "B-MISC"}
	c = &corpus.Corpus{}
	for range 15000 { // enough for 48 batches of 256
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
	Train      float64 `json:"train_tokens_per_sec"`
	Predict    float64 `json:"predict_tokens_per_sec"`
	TrainCPU   float64 `json:"train_tokens_per_cpu_sec"`
	PredictCPU float64 `json:"predict_tokens_per_cpu_sec"`
	PeakRSS    float64 `json:"peak_rss_bytes"`
	Threads    int     `json:"threads"`
	Torch      string  `json:"torch"`
}

// timeTokens runs f and returns tokens per second and per CPU-second of
// this process.
func timeTokens(tokens int, f func()) (wall, cpu float64) {
	c0, w0 := cpuTime(), time.Now()
	f()
	return float64(tokens) / time.Since(w0).Seconds(), float64(tokens) / (cpuTime() - c0).Seconds()
}

// cpuTime is the CPU time this process has used, all threads.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchThroughput(b *testing.B, head, scheme, loss string) {
	python := os.Getenv("NERFLOW_BENCH_PYTHON")
	if python == "" {
		python = "/usr/bin/python3"
	}
	if _, err := exec.LookPath(python); err != nil {
		b.Skipf("no %s for the PyTorch reference", python)
	}
	device, err := ParseDevice(os.Getenv("NERFLOW_BENCH_DEVICE"))
	if err != nil {
		b.Fatal(err)
	}
	threads := []int{1}
	if n := runtime.NumCPU(); n > 1 {
		threads = append(threads, n)
	}
	if v := os.Getenv("NERFLOW_BENCH_THREADS"); v != "" {
		threads = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				b.Fatalf("NERFLOW_BENCH_THREADS=%q: want positive integers", v)
			}
			threads = append(threads, n)
		}
	}
	defer kit.SetThreads(0)
	for _, n := range threads {
		b.Run(fmt.Sprintf("threads=%d", n), func(b *testing.B) {
			benchThroughputOn(b, head, scheme, loss, python, device, n)
		})
	}
}

// benchThroughputOn measures at the given thread count; the Go side runs
// as trainings do, on a thread of its own (onComputeThread).
func benchThroughputOn(b *testing.B, head, scheme, loss, python string, device gotch.Device, threads int) {
	kit.SetThreads(threads)
	kit.OnComputeThread(func(func()) { benchThroughputOnThread(b, head, scheme, loss, python, device) })
}

func benchThroughputOnThread(b *testing.B, head, scheme, loss, python string, device gotch.Device) {
	batchSize := benchEnvInt(b, "NERFLOW_BENCH_BATCH", 32)
	steps := benchEnvInt(b, "NERFLOW_BENCH_STEPS", 40)
	c := benchCorpus(b)
	cfg := DefaultConfig()
	cfg.Head, cfg.Scheme = head, scheme
	m, exs := benchTagger(b, c, NewVocab(c, nil, MinWordCount(1)), cfg, 1, device)
	defer m.Close()
	batches := bucketBatches(exs, batchSize, rand.New(rand.NewPCG(1, 1)))
	if len(batches) < benchWarmup+steps {
		b.Fatalf("%d batches of %d sentences, want %d", len(batches), batchSize, benchWarmup+steps)
	}
	batches = batches[:benchWarmup+steps]
	timed := batches[benchWarmup:]
	tokens := 0
	for _, ids := range timed {
		for _, id := range ids {
			tokens += exs[id].len()
		}
	}
	run := DefaultTrainConfig()
	run.Loss = loss
	run.BatchSize = batchSize
	spec := writeBenchSpec(b, m, exs, batches, run)

	step, closeOpt := benchTrainer(b, m, exs, run, 1)
	defer closeOpt()
	trainGo := func(bs [][]int) {
		for _, ids := range bs {
			step(ids)
		}
	}
	out := make([]Prediction, len(exs))
	predictGo := func(bs [][]int) {
		if err := m.predictBatches(exs, bs, out); err != nil {
			b.Fatal(err)
		}
	}

	trainGo(batches[:benchWarmup])
	predictGo(batches[:benchWarmup])
	ref := startReference(b, python, spec, device)
	defer ref.close()
	// The sides take turns, Go then PyTorch, so that each always starts
	// right after the other (with the caches the other left), and each
	// round's ratio compares two measurements taken seconds apart. (Turns
	// in ABBA order were tried: a side's second pass in a row ran faster,
	// and the median of an odd number of rounds favoured the side that went
	// first.)
	var goTrain, goPredict, torchTrain, torchPredict rounds
	var last referenceResult
	b.ResetTimer()
	for range benchEnvInt(b, "NERFLOW_BENCH_ROUNDS", 5) {
		goTrain.add(timeTokens(tokens, func() { trainGo(timed) }))
		goPredict.add(timeTokens(tokens, func() { predictGo(timed) }))
		last = ref.round(b)
		torchTrain.add(last.Train, last.TrainCPU)
		torchPredict.add(last.Predict, last.PredictCPU)
	}
	b.StopTimer()
	b.ReportMetric(0, "ns/op")
	var perRound []string
	for _, r := range []struct {
		name      string
		gos, refs rounds
	}{{"train", goTrain, torchTrain}, {"predict", goPredict, torchPredict}} {
		wall, cpu := r.gos.ratios(r.refs)
		b.ReportMetric(median(r.gos.wall), "go-"+r.name+"-tok/s")
		b.ReportMetric(median(r.refs.wall), "torch-"+r.name+"-tok/s")
		b.ReportMetric(median(wall), r.name+"-ratio")
		b.ReportMetric(slices.Min(wall), r.name+"-ratio-min")
		b.ReportMetric(median(cpu), r.name+"-cpu-ratio")
		perRound = append(perRound, fmt.Sprintf("%s %s", r.name, formatRatios(wall)))
	}
	b.ReportMetric(peakRSS()/(1<<20), "go-peak-MB")
	b.ReportMetric(last.PeakRSS/(1<<20), "torch-peak-MB")
	b.Logf("%s head on %v, batch %d: %d timed batches, %d tokens, vocabulary %d words, %d thread(s); PyTorch %s with %d thread(s); ratio per round: %s; median tokens per CPU-second: train %.0f vs %.0f, predict %.0f vs %.0f",
		head, device, batchSize, len(timed), tokens, len(m.Vocab.Words), kit.Threads(), last.Torch, last.Threads,
		strings.Join(perRound, ", "), median(goTrain.cpu), median(torchTrain.cpu), median(goPredict.cpu), median(torchPredict.cpu))
}

// rounds holds one side's throughput per round, by wall clock and by CPU
// time.
type rounds struct{ wall, cpu []float64 }

func (r *rounds) add(wall, cpu float64) {
	r.wall, r.cpu = append(r.wall, wall), append(r.cpu, cpu)
}

// ratios is r against ref, round by round.
func (r rounds) ratios(ref rounds) (wall, cpu []float64) {
	for i := range r.wall {
		wall = append(wall, r.wall[i]/ref.wall[i])
		cpu = append(cpu, r.cpu[i]/ref.cpu[i])
	}
	return wall, cpu
}

// median of xs (the mean of the middle two for an even count).
func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func formatRatios(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.FormatFloat(x, 'f', 2, 64)
	}
	return strings.Join(parts, " ")
}

// benchTagger builds a tagger of cfg for CoNLL's types and encodes c for it.
func benchTagger(b *testing.B, c *corpus.Corpus, vocab *Vocab, cfg Config, seed uint64, device gotch.Device) (*Tagger, []example) {
	sch, err := corpus.ParseScheme(cfg.Scheme)
	if err != nil {
		b.Fatal(err)
	}
	labels, err := NewLabels(sch, []string{"PER", "LOC", "ORG", "MISC"})
	if err != nil {
		b.Fatal(err)
	}
	m, err := NewTagger(cfg, vocab, labels, nil, seed, device)
	if err != nil {
		b.Fatal(err)
	}
	exs, err := m.encodeCorpus(c, true)
	if err != nil {
		m.Close()
		b.Fatal(err)
	}
	return m, exs
}

// benchTrainer returns a function that trains m on one batch of exs (Adam
// at run's learning rate, dropout drawn from seed) and one that frees the
// optimizer.
func benchTrainer(b *testing.B, m *Tagger, exs []example, run TrainConfig, seed uint64) (step func(ids []int), done func()) {
	tr, err := NewTrainer(m, run)
	if err != nil {
		b.Fatal(err)
	}
	opt, err := newAdam(m, run.MaxGradNorm)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 3))
	return func(ids []int) {
		if _, _, err := tr.step(newBatch(exs, ids), nil, exs, nil, nil, unlabeledStep{}, &kit.Step{Opt: opt, LR: run.LearningRate}, rng, nil); err != nil {
			b.Fatal(err)
		}
	}, opt.Close
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

// reference is the PyTorch side: one process for the whole benchmark, which
// sets up and warms once and then times a round whenever asked.
type reference struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func startReference(b *testing.B, python, spec string, device gotch.Device) *reference {
	dev := "cpu"
	if device.IsCuda() {
		dev = fmt.Sprintf("cuda:%d", device.CInt())
	}
	cmd := exec.Command(python, filepath.Join("testdata", "reference_tagger.py"), spec,
		"--warmup", strconv.Itoa(benchWarmup), "--threads", strconv.Itoa(kit.Threads()), "--device", dev)
	// OpenBLAS's pool as the Go side sets it (see kit.BLASThreads).
	cmd.Env = append(os.Environ(), "OPENBLAS_NUM_THREADS="+strconv.Itoa(kit.BLASThreads))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatalf("PyTorch reference: %v", err)
	}
	r := &reference{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	var ready struct {
		Ready bool `json:"ready"`
	}
	r.read(b, &ready)
	return r
}

func (r *reference) read(b *testing.B, v any) {
	if !r.out.Scan() {
		r.close()
		b.Fatalf("PyTorch reference ended early (%v)", r.out.Err())
	}
	if err := json.Unmarshal(r.out.Bytes(), v); err != nil {
		r.close()
		b.Fatalf("PyTorch reference printed %q: %v", r.out.Bytes(), err)
	}
}

// round times one pass of training and of prediction on the reference.
func (r *reference) round(b *testing.B) referenceResult {
	if _, err := io.WriteString(r.in, "round\n"); err != nil {
		b.Fatalf("PyTorch reference: %v", err)
	}
	var res referenceResult
	r.read(b, &res)
	return res
}

func (r *reference) close() {
	r.in.Close()
	r.cmd.Wait()
}

// peakRSS is the process's peak resident memory (VmHWM), in bytes.
func peakRSS() float64 { return float64(kit.PeakResidentBytes()) }

// BenchmarkTrainMemory trains the token head with GCE and noisy-label
// removal (RoSTER's first step on distant labels) for several epochs and
// reports the process's resident memory after the second and the last
// epoch, and their ratio: a run that leaks, or an allocator that keeps what
// it freed, grows from one epoch to the next; a healthy one stays within a
// few percent. The reference is the run's own second epoch (the first one
// warms libtorch's and the allocator's caches up).
//
//	NERFLOW_BENCH_EPOCHS     epochs (default 15)
//	NERFLOW_BENCH_SENTENCES  training sentences, from the start of the data (default 2000)
func BenchmarkTrainMemory(b *testing.B) {
	epochs := benchEnvInt(b, "NERFLOW_BENCH_EPOCHS", 15)
	sentences := benchEnvInt(b, "NERFLOW_BENCH_SENTENCES", 2000)
	if epochs < 3 {
		b.Fatalf("NERFLOW_BENCH_EPOCHS=%d: want at least 3", epochs)
	}
	device, err := ParseDevice(os.Getenv("NERFLOW_BENCH_DEVICE"))
	if err != nil {
		b.Fatal(err)
	}
	c := benchCorpus(b)
	c.Sentences = c.Sentences[:min(sentences, len(c.Sentences))]
	run := DefaultTrainConfig()
	run.Loss, run.Epochs, run.DropO = LossGCE, epochs, 0.5
	run.SetLossParam("update_interval", 50)
	b.ResetTimer()
	m, res, err := Fit(context.Background(), Job{Train: c, Model: DefaultConfig(), Run: run, Device: device, MinWordCount: 1})
	if err != nil {
		b.Fatal(err)
	}
	m.Close()
	b.StopTimer()
	mb := func(e EpochReport) float64 { return float64(e.RSSBytes) / (1 << 20) }
	second, last := res.Epochs[1], res.Epochs[len(res.Epochs)-1]
	var perEpoch []string
	for _, e := range res.Epochs {
		perEpoch = append(perEpoch, strconv.FormatFloat(mb(e), 'f', 0, 64))
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(mb(second), "rss-epoch2-MB")
	b.ReportMetric(mb(last), "rss-last-MB")
	b.ReportMetric(mb(last)/mb(second), "rss-last/epoch2")
	b.ReportMetric(peakRSS()/(1<<20), "peak-MB")
	b.ReportMetric(last.TokensPerSec, "tok/s")
	b.Logf("%d sentences, %d epochs; resident MB per epoch: %s", len(c.Sentences), len(res.Epochs), strings.Join(perEpoch, " "))
}

// BenchmarkConcurrentTrainings trains one tagger alone, then two at once in
// one process (as a worker serving two nodes), each with the thread share
// of computeThreads, then two at once with every core each (what a process
// without the share did), and reports each training's throughput in the
// pairs against the one alone. On N cores a pair ideally keeps half the
// speed (0.5) when N is small; oversubscribed threads make it crawl below.
func BenchmarkConcurrentTrainings(b *testing.B) {
	steps := benchEnvInt(b, "NERFLOW_BENCH_STEPS", 20)
	c := benchCorpus(b)
	vocab := NewVocab(c, nil, MinWordCount(1))
	// trainSteps runs steps batches on its own tagger and returns tokens
	// per second; train runs it as trainings run, on a thread of its own.
	trainSteps := func(seed uint64) float64 {
		m, exs := benchTagger(b, c, vocab, DefaultConfig(), seed, gotch.CPU)
		defer m.Close()
		step, closeOpt := benchTrainer(b, m, exs, DefaultTrainConfig(), seed)
		defer closeOpt()
		batches := bucketBatches(exs, 32, rand.New(rand.NewPCG(seed, 1)))[:benchWarmup+steps]
		tokens := 0
		var start time.Time
		for i, ids := range batches {
			if i == benchWarmup {
				start = time.Now()
			}
			if i >= benchWarmup {
				tokens += newBatch(exs, ids).n
			}
			step(ids)
		}
		return float64(tokens) / time.Since(start).Seconds()
	}
	train := func(seed uint64) (tokensPerSec float64) {
		kit.OnComputeThread(func(refresh func()) {
			refresh() // the other of a pair may have started meanwhile
			tokensPerSec = trainSteps(seed)
		})
		return tokensPerSec
	}
	pair := func() float64 {
		var wg sync.WaitGroup
		speeds := make([]float64, 2)
		for i := range speeds {
			wg.Go(func() { speeds[i] = train(uint64(i + 1)) })
		}
		wg.Wait()
		return (speeds[0] + speeds[1]) / 2
	}
	defer kit.SetThreads(0)
	b.ResetTimer()
	alone := train(1)
	shared := pair()
	kit.SetThreads(runtime.NumCPU())
	oversubscribed := pair()
	b.StopTimer()
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(alone, "alone-tok/s")
	b.ReportMetric(shared/alone, "pair-each/alone")
	b.ReportMetric(oversubscribed/alone, "pair-all-cores-each/alone")
	b.Logf("%d cores: alone %.0f tokens/s; in a pair, each %.0f with the share, %.0f with every core", runtime.NumCPU(), alone, shared, oversubscribed)
}

// newAdam is the optimizer kit.Fit makes for the tagger's weights, for
// benchmarks that step without the loop.
func newAdam(m *Tagger, maxGradNorm float64) (*kit.Adam, error) {
	names, params := kit.SplitNamed(m.namedWeights())
	return kit.NewAdam(names, params, maxGradNorm)
}
