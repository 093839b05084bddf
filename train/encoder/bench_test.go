package encoder

import (
	"context"
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/kit"
	"github.com/nerflow/nerflow/train/tagger"
)

// BenchmarkPretrainStep times pretraining steps of the default preset at
// one libtorch thread on fixed batches of 32 sentences of 15-35 words
// drawn from a 30,000-word vocabulary (Brown's sentences average 20
// words), and reports training tokens/s and tokens per CPU-second of the
// computing thread. BenchmarkPretrainThroughput compares the same steps
// with PyTorch.
func BenchmarkPretrainStep(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	words := make([]string, 30000)
	for i := range words {
		words[i] = fmt.Sprintf("w%dx", i)
	}
	var text [][]string
	for range 256 {
		s := make([]string, 15+rng.IntN(21))
		for j := range s {
			s[j] = words[rng.IntN(len(words))]
		}
		text = append(text, s)
	}
	cfg := Presets[DefaultPreset]
	v := &Vocab{Words: append([]string{"<pad>", "<unk>", "<mask>"}, words...), Chars: []string{"", "", ""}}
	for c := '0'; c <= '9'; c++ {
		v.Chars = append(v.Chars, string(c))
	}
	v.Chars = append(v.Chars, "w", "x")
	v.index()
	m, err := New(cfg, v, nil, 1, gotch.CPU)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	kit.SetThreads(1)
	defer kit.SetThreads(0)
	var tokens int
	var elapsed, cpu time.Duration
	kit.OnComputeThread(func(func()) {
		names, params := m.parameters()
		opt, err := kit.NewAdam(names, params, 1)
		if err != nil {
			b.Fatal(err)
		}
		defer opt.Close()
		masks, dropout := rand.New(rand.NewPCG(2, 2)), rand.New(rand.NewPCG(3, 3))
		var batches []*batch
		for i := 0; i < len(text); i += 32 {
			var sents []maskedSentence
			for _, s := range text[i : i+32] {
				sents = append(sents, v.mask(s, DefaultMasking(), masks))
			}
			batches = append(batches, newBatch(sents))
		}
		if _, err := m.step(batches[0], &kit.Step{LR: 1e-4, Opt: opt}, dropout); err != nil { // warm-up: first-touch allocations
			b.Fatal(err)
		}
		b.ResetTimer()
		cpu0 := threadCPU(b)
		for i := range b.N {
			for _, bt := range batches {
				start := time.Now()
				if _, err := m.step(bt, &kit.Step{LR: 1e-4, Opt: opt}, dropout); err != nil {
					b.Fatal(err)
				}
				elapsed += time.Since(start)
				tokens += bt.tokens
			}
			_ = i
		}
		cpu = threadCPU(b) - cpu0
	})
	b.ReportMetric(float64(tokens)/elapsed.Seconds(), "tokens/s")
	// On a shared machine the wall clock measures the neighbours too; at
	// one thread, the computing thread's CPU time is the work's own.
	b.ReportMetric(float64(tokens)/cpu.Seconds(), "tokens/cpu-s")
}

// threadCPU is the calling OS thread's CPU time (user and system).
func threadCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkFineTuneStep times training steps of the default tagger
// (tagger.DefaultConfig: a 200-unit BiLSTM over 100-d word vectors and the
// character CNN, the token head, cross entropy) at one libtorch thread, on
// 8 batches of 32 sentences of 15-35 words from a 30,000-word vocabulary:
// without an encoder, and fine-tuning an encoder of the tiny or the default
// (small) preset under its BiLSTM or in its place. It reports training
// tokens per second of the computing thread's CPU time (an epoch's steps,
// after an epoch of warm-up). No PyTorch reference yet.
func BenchmarkFineTuneStep(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	words := make([]string, 30000)
	for i := range words {
		words[i] = fmt.Sprintf("w%dx", i)
	}
	c := &corpus.Corpus{}
	var text [][]string
	for range 256 {
		s := corpus.Sentence{Tokens: make([]string, 15+rng.IntN(21))}
		for j := range s.Tokens {
			s.Tokens[j] = words[rng.IntN(len(words))]
			tag := "O"
			if rng.IntN(10) == 0 {
				tag = "I-PER"
			}
			s.Tags = append(s.Tags, tag)
		}
		c.Sentences = append(c.Sentences, s)
		text = append(text, s.Tokens)
	}
	for _, bc := range []struct{ name, preset, placement string }{
		{"plain", "", tagger.EncoderNone},
		{"tiny-under", "tiny", tagger.EncoderUnder},
		{"small-under", "small", tagger.EncoderUnder},
		{"small-replace", "small", tagger.EncoderReplace},
	} {
		b.Run(bc.name, func(b *testing.B) {
			kit.SetThreads(1)
			defer kit.SetThreads(0)
			var opts []tagger.TaggerOption
			if bc.preset != "" {
				enc, err := New(Presets[bc.preset], NewVocab(text, 30000, 1), nil, 1, gotch.CPU)
				if err != nil {
					b.Fatal(err)
				}
				opts = append(opts, tagger.WithEncoder(enc))
			}
			cfg := tagger.DefaultConfig()
			cfg.EncoderPlacement = bc.placement
			labels, err := tagger.NewLabels(corpus.IO, []string{"PER"})
			if err != nil {
				b.Fatal(err)
			}
			m, err := tagger.NewTagger(cfg, tagger.NewVocab(c, nil, tagger.MinWordCount(1)), labels, nil, 1, gotch.CPU, opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			run := tagger.DefaultTrainConfig()
			run.Epochs = 1
			var tokens int
			var cpu time.Duration
			kit.OnComputeThread(func(func()) {
				train := func() {
					tr, err := tagger.NewTrainer(m, run)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := tr.Run(context.Background(), c, nil); err != nil {
						b.Fatal(err)
					}
				}
				train() // warm-up: first-touch allocations
				b.ResetTimer()
				cpu0 := threadCPU(b)
				for range b.N {
					train()
					tokens += c.NumTokens()
				}
				cpu = threadCPU(b) - cpu0
			})
			b.ReportMetric(float64(tokens)/cpu.Seconds(), "tokens/cpu-s")
		})
	}
}
