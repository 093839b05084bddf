package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/predict"
	"github.com/nerflow/nerflow/server"
	"github.com/nerflow/nerflow/train/tagger"
)

// benchRequests is one operation of the serving benchmark: this many
// requests, each a text of two fixture sentences (~14 tokens, CoNLL-2003's
// mean sentence length).
const benchRequests = 256

// benchTagger trains the small tagger of the tests on the fixture (a few
// seconds), with the architecture's default sizes so that the forward
// pass costs what a real one does per token.
func benchTagger(b *testing.B) *tagger.Tagger {
	b.Helper()
	read := func(name string) []string {
		data, err := os.ReadFile("testdata/tiny/" + name)
		if err != nil {
			b.Fatal(err)
		}
		return strings.Split(strings.TrimSpace(string(data)), "\n")
	}
	text, labels := read("train_text.txt"), read("train_label.txt")
	c := &corpus.Corpus{}
	for i := range text {
		c.Sentences = append(c.Sentences, corpus.Sentence{Tokens: strings.Fields(text[i]), Tags: strings.Fields(labels[i])})
	}
	run := tagger.DefaultTrainConfig()
	run.Epochs, run.BatchSize, run.LearningRate, run.Loss = 3, 4, 0.01, tagger.LossCRF
	cfg := tagger.DefaultConfig()
	cfg.Head, cfg.Scheme = tagger.CRFHead, "bio"
	m, _, err := tagger.Fit(context.Background(), tagger.Job{Train: c, Model: cfg, Run: run, Device: gotch.CPU, MinWordCount: 1})
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// benchTexts makes the requests' texts from the sentences of file (default
// the fixture's), two sentences per request.
func benchTexts(b *testing.B, file string) []string {
	if file == "" {
		file = "testdata/tiny/train_text.txt"
	}
	data, err := os.ReadFile(file)
	if err != nil {
		b.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	texts := make([]string, benchRequests)
	for i := range texts {
		texts[i] = lines[i%len(lines)] + " " + lines[(i*7+3)%len(lines)]
	}
	return texts
}

// latencies collects per-request durations.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

func (l *latencies) report(b *testing.B, tokens int, elapsed time.Duration, ref float64) float64 {
	slices.Sort(l.d)
	q := func(p float64) float64 {
		return float64(l.d[min(len(l.d)-1, int(p*float64(len(l.d))))].Microseconds()) / 1000
	}
	tps := float64(tokens) / elapsed.Seconds()
	b.ReportMetric(tps, "tokens/s")
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	if ref > 0 {
		b.ReportMetric(tps/ref, "x-reference")
	}
	b.ReportMetric(0, "ns/op") // an op is a burst of requests: its time says nothing alone
	return tps
}

// BenchmarkServe measures POST /v1/predict end to end (HTTP, JSON,
// tokenization, batching, the tagger, span decoding) with 1 and 16
// concurrent clients, with batching on and off, against a reference
// measured in the same run: the tagger called directly, one request at a
// time (predict.Model.Annotate, no HTTP, no batcher). x-reference is
// tokens/s over the reference's.
func BenchmarkServe(b *testing.B) {
	// NERFLOW_BENCH_MODEL_DIR serves a saved tagger instead (e.g. one
	// trained on CoNLL-2003: nerflow artifacts get RUN train model -o DIR)
	// and NERFLOW_BENCH_TEXT takes the requests' sentences from a file of
	// one sentence per line (e.g. CoNLL-2003's valid_text.txt).
	dir := os.Getenv("NERFLOW_BENCH_MODEL_DIR")
	if dir == "" {
		tagger := benchTagger(b)
		dir = b.TempDir()
		if err := tagger.Save(dir); err != nil {
			b.Fatal(err)
		}
		tagger.Close()
	}
	model, err := predict.LoadDir(dir, gotch.CPU, predict.Info{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer model.Close()
	texts := benchTexts(b, os.Getenv("NERFLOW_BENCH_TEXT"))
	var ref float64

	b.Run("reference=tagger-direct", func(b *testing.B) {
		var lat latencies
		tokens := 0
		start := time.Now()
		for b.Loop() {
			for _, text := range texts {
				t0 := time.Now()
				r, err := model.Annotate(predict.Request{Texts: []string{text}}, 64)
				if err != nil {
					b.Fatal(err)
				}
				lat.add(time.Since(t0))
				tokens += r.TokenCount
			}
		}
		ref = lat.report(b, tokens, time.Since(start), 0)
	})

	token := "bench-token-0123456789"
	for _, batched := range []bool{false, true} {
		maxBatch := 1
		if batched {
			maxBatch = 64
		}
		// Each batcher owns (and closes) its own copy of the model.
		m, err := predict.LoadDir(dir, gotch.CPU, predict.Info{Name: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		bt := predict.NewBatcher(m, predict.Options{MaxBatch: maxBatch, MaxWait: time.Millisecond})
		srv, err := server.New(nil, token, server.WithPredictor(bt, "bench"))
		if err != nil {
			b.Fatal(err)
		}
		hs := httptest.NewServer(srv)
		for _, clients := range []int{1, 16} {
			b.Run(fmt.Sprintf("http/batch=%d/clients=%d", maxBatch, clients), func(b *testing.B) {
				client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
				var lat latencies
				tokens := 0
				var mu sync.Mutex
				start := time.Now()
				for b.Loop() {
					next := make(chan string, len(texts))
					for _, t := range texts {
						next <- t
					}
					close(next)
					var wg sync.WaitGroup
					for range clients {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for text := range next {
								body, _ := json.Marshal(map[string]string{"text": text})
								req, _ := http.NewRequest("POST", hs.URL+"/v1/predict", bytes.NewReader(body))
								req.Header.Set("Authorization", "Bearer "+token)
								t0 := time.Now()
								res, err := client.Do(req)
								if err != nil {
									b.Error(err)
									return
								}
								var r predict.Response
								err = json.NewDecoder(res.Body).Decode(&r)
								res.Body.Close()
								lat.add(time.Since(t0))
								if err != nil || res.StatusCode != http.StatusOK {
									b.Errorf("status %d: %v", res.StatusCode, err)
									return
								}
								mu.Lock()
								tokens += r.TokenCount
								mu.Unlock()
							}
						}()
					}
					wg.Wait()
				}
				lat.report(b, tokens, time.Since(start), ref)
			})
		}
		hs.Close()
		bt.Close()
	}
}
