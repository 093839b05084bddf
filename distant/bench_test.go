package distant

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The benchmark world: up to 1M distinct phrases over a 1M-word vocabulary
// and a corpus of 1M tokens whose words follow a Zipf law, with phrases of
// the smallest gazetteer planted in it so that every size has real matches.
// Everything comes from fixed seeds, so runs compare.
//
// The Zipf exponent is set from real text, a little on the hard side: the
// corpus has ~100k distinct words (BC5CDR's raw text has 19.6k in 342k
// tokens, CoNLL-2003's training text 23.6k in 204k), and the scanner's
// token cache answers fewer lookups than on either.
const (
	benchVocab     = 1 << 20
	benchPhrases   = 1_000_000
	benchTokens    = 1_000_000
	benchSentLen   = 25
	benchPlantRate = 0.05 // chance that a position starts a planted phrase
)

var (
	benchOnce   sync.Once
	benchGaz    []Entry    // benchPhrases distinct entries; a size-k gazetteer is the first k
	benchCorpus [][]string // sentences
)

func benchWord(i uint64) string { return "w" + strconv.FormatUint(i, 36) }

func benchWorld() ([]Entry, [][]string) {
	benchOnce.Do(func() {
		r := rand.New(rand.NewPCG(2026, 11))
		seen := make(map[string]bool, benchPhrases)
		types := []string{"Chemical", "Disease", "Gene", ""}
		for len(benchGaz) < benchPhrases {
			n := 1
			switch p := r.Float64(); {
			case p < 0.30:
			case p < 0.65:
				n = 2
			case p < 0.85:
				n = 3
			case p < 0.95:
				n = 4
			default:
				n = 5
			}
			toks := make([]string, n)
			for i := range toks {
				toks[i] = benchWord(r.Uint64N(benchVocab))
			}
			phrase := strings.Join(toks, " ")
			if seen[phrase] {
				continue
			}
			seen[phrase] = true
			benchGaz = append(benchGaz, Entry{Phrase: phrase, Tokens: toks, Type: types[r.IntN(len(types))]})
		}
		zipf := rand.NewZipf(r, 1.2, 2, benchVocab-1)
		var sent []string
		for total := 0; total < benchTokens; {
			if r.Float64() < benchPlantRate {
				sent = append(sent, benchGaz[r.IntN(10_000)].Tokens...)
			} else {
				sent = append(sent, benchWord(zipf.Uint64()))
			}
			if len(sent) >= benchSentLen {
				total += len(sent)
				benchCorpus = append(benchCorpus, sent)
				sent = nil
			}
		}
	})
	return benchGaz, benchCorpus
}

// heapAfter returns the live heap growth caused by build, keeping its
// result alive until measured.
func heapAfter[T any](build func() T) (T, float64) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	v := build()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(v)
	return v, float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / (1 << 20)
}

// BenchmarkMatch measures matching throughput and memory of the automaton
// and of the naive per-position lookup, in the same run, for gazetteers of
// 10k, 100k and 1M phrases over a 1M-token corpus. One op scans the corpus
// once with each. Throughput is given per second of wall time and per
// second of the scanning thread's CPU time, which is steadier on a shared
// machine. Run on one core:
//
//	go test ./distant -run '^$' -bench Match -benchtime 3x -cpu 1
func BenchmarkMatch(b *testing.B) {
	entries, sents := benchWorld()
	tokens := 0
	for _, s := range sents {
		tokens += len(s)
	}
	for _, size := range []int{10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("phrases=%dk", size/1000), func(b *testing.B) {
			g := &Gazetteer{Name: "synthetic", Entries: entries[:size]}
			start := time.Now()
			m, acMB := heapAfter(func() *Matcher {
				m, err := NewMatcher([]*Gazetteer{g})
				if err != nil {
					b.Fatal(err)
				}
				return m
			})
			build := time.Since(start)
			naive, naiveMB := heapAfter(func() *naiveMatcher { return newNaive(m) })
			sc, ref := m.Scanner(), m.Scanner()

			runtime.LockOSThread() // for threadCPU
			defer runtime.UnlockOSThread()
			var acTime, naiveTime, acCPU, naiveCPU time.Duration
			matches := 0
			b.ResetTimer()
			for range b.N {
				t0, c0 := time.Now(), threadCPU()
				for _, s := range sents {
					matches += len(sc.Match(s))
				}
				t1, c1 := time.Now(), threadCPU()
				for _, s := range sents {
					naive.match(ref, s)
				}
				acTime += t1.Sub(t0)
				naiveTime += time.Since(t1)
				acCPU += c1 - c0
				naiveCPU += threadCPU() - c1
			}
			n := float64(tokens * b.N)
			b.ReportMetric(n/acTime.Seconds(), "ac-tokens/s")
			b.ReportMetric(n/naiveTime.Seconds(), "naive-tokens/s")
			b.ReportMetric(naiveTime.Seconds()/acTime.Seconds(), "speedup")
			if acCPU > 0 && naiveCPU > 0 {
				b.ReportMetric(n/acCPU.Seconds(), "ac-tokens/cpu-s")
				b.ReportMetric(n/naiveCPU.Seconds(), "naive-tokens/cpu-s")
			}
			b.ReportMetric(acMB, "ac-MB")
			b.ReportMetric(naiveMB, "naive-MB")
			b.ReportMetric(build.Seconds(), "build-s")
			b.ReportMetric(float64(matches)/float64(b.N), "matches")
		})
	}
}
