package tagger

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/internal/refbench"
	"github.com/nerflow/nerflow/kit"
)

// The benchmarks train and run the tagger on real sentences (the CoNLL-2003
// training split from ../shared/data, or random ones where it is absent)
// and, in the same run, a PyTorch implementation of the same architecture
// (testdata/reference_tagger.py, with Debian's python3-torch) on exactly the
// same batches, and report both throughputs, their ratios and peak memory:
//
//	go test ./train/tagger -run '^$' -bench Throughput -benchtime 1x
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

func BenchmarkTrainThroughputTokenHead(b *testing.B) { benchThroughput(b, TokenHead, "io", LossCE) }
func BenchmarkTrainThroughputCRF(b *testing.B)       { benchThroughput(b, CRFHead, "bio", LossCRF) }

func benchThroughput(b *testing.B, head, scheme, loss string) {
	python := refbench.Python(b)
	device, err := ParseDevice(os.Getenv("NERFLOW_BENCH_DEVICE"))
	if err != nil {
		b.Fatal(err)
	}
	defer kit.SetThreads(0)
	for _, n := range refbench.Threads(b) {
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
	batchSize := refbench.EnvInt(b, "NERFLOW_BENCH_BATCH", 32)
	steps := refbench.EnvInt(b, "NERFLOW_BENCH_STEPS", 40)
	c := refbench.Corpus(b)
	cfg := DefaultConfig()
	cfg.Head, cfg.Scheme = head, scheme
	m := benchTagger(b, NewVocab(c, nil, MinWordCount(1)), cfg, 1, device)
	defer m.Close()
	run := DefaultTrainConfig()
	run.Loss = loss
	run.BatchSize = batchSize
	st := benchSteps(b, m, c, run, 1)
	defer st.Close()
	batches, timed := refbench.Take(b, st.Batches(batchSize, 1), steps)
	spec := refbench.WriteSpec(b, st.ReferenceSpec(batches))
	trainGo, predictGo := refbench.Must(b, st.Train), refbench.Must(b, st.Predict)
	trainGo(batches[:refbench.Warmup])
	predictGo(batches[:refbench.Warmup])
	ref := refbench.Start(b, python, filepath.Join("testdata", "reference_tagger.py"), spec, device)
	defer ref.Close()
	_, summary := refbench.Compare(b, ref, st.Tokens(timed), func() { trainGo(timed) }, func() { predictGo(timed) })
	b.Logf("%s head on %v, batch %d: %d timed batches, %d tokens, vocabulary %d words, %d thread(s); %s",
		head, device, batchSize, len(timed), st.Tokens(timed), len(m.Vocab.Words), kit.Threads(), summary)
}

// benchTagger builds a tagger of cfg for CoNLL's types.
func benchTagger(b *testing.B, vocab *Vocab, cfg Config, seed uint64, device gotch.Device) *Tagger {
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
	return m
}

// benchSteps readies m to train on c's batches one step at a time.
func benchSteps(b *testing.B, m *Tagger, c *corpus.Corpus, run TrainConfig, seed uint64) *Steps {
	st, err := NewSteps(m, c, run, seed)
	if err != nil {
		b.Fatal(err)
	}
	return st
}

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
	epochs := refbench.EnvInt(b, "NERFLOW_BENCH_EPOCHS", 15)
	sentences := refbench.EnvInt(b, "NERFLOW_BENCH_SENTENCES", 2000)
	if epochs < 3 {
		b.Fatalf("NERFLOW_BENCH_EPOCHS=%d: want at least 3", epochs)
	}
	device, err := ParseDevice(os.Getenv("NERFLOW_BENCH_DEVICE"))
	if err != nil {
		b.Fatal(err)
	}
	c := refbench.Corpus(b)
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
	b.ReportMetric(float64(kit.PeakResidentBytes())/(1<<20), "peak-MB")
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
	steps := refbench.EnvInt(b, "NERFLOW_BENCH_STEPS", 20)
	c := refbench.Corpus(b)
	vocab := NewVocab(c, nil, MinWordCount(1))
	// trainSteps runs steps batches on its own tagger and returns tokens
	// per second; train runs it as trainings run, on a thread of its own.
	trainSteps := func(seed uint64) float64 {
		m := benchTagger(b, vocab, DefaultConfig(), seed, gotch.CPU)
		defer m.Close()
		st := benchSteps(b, m, c, DefaultTrainConfig(), seed)
		defer st.Close()
		batches := st.Batches(32, seed)[:refbench.Warmup+steps]
		if err := st.Train(batches[:refbench.Warmup]); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := st.Train(batches[refbench.Warmup:]); err != nil {
			b.Fatal(err)
		}
		tokens := st.Tokens(batches[refbench.Warmup:])
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
