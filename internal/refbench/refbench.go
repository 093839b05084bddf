// Package refbench runs a model's benchmark against a PyTorch implementation
// of the same model on the same batches, in the same run: the Go side and a
// reference script take turns, round by round, and each round gives a ratio
// of throughputs measured seconds apart. Single rounds on a shared machine
// move by 10-25%; the median of paired rounds moves by a few percent.
//
// The reference script is one Python process for the whole benchmark. It is
// started with the batches file and --warmup, --threads and --device; once
// set up and warmed it prints {"ready": true, ...}; then, for each line
// "round" on its standard input, it times one pass of training and one of
// prediction over the timed batches and prints a Result as one line of JSON.
//
// The environment can change a benchmark (the GPU build kit uses it):
//
//	NERFLOW_BENCH_DEVICE   cpu (default) or cuda:N, for both sides
//	NERFLOW_BENCH_BATCH    sentences per batch (default 32)
//	NERFLOW_BENCH_STEPS    timed batches per round (default: the benchmark's)
//	NERFLOW_BENCH_ROUNDS   rounds, each Go then PyTorch (default 5)
//	NERFLOW_BENCH_THREADS  comma-separated thread counts (default 1 and all cores)
//	NERFLOW_BENCH_PYTHON   the Python with torch (default /usr/bin/python3)
package refbench

import (
	"bufio"
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
	"syscall"
	"testing"
	"time"

	"github.com/sugarme/gotch"

	"github.com/nerflow/nerflow/corpus"
	"github.com/nerflow/nerflow/kit"
)

// Warmup is the number of batches each side trains and predicts before the
// timed rounds (first-touch allocations, cuDNN's and OpenBLAS's set-up).
const Warmup = 3

// EnvInt reads a positive integer from the environment, def when unset.
func EnvInt(b testing.TB, name string, def int) int {
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

// Corpus is the benchmarks' text: CoNLL-2003's training split with its
// gold tags (NERFLOW_BENCH_DATA, a directory with train_text.txt and
// train_label_true.txt; ../shared/data/conll03 beside the repository by
// default, read from a package two folders down), or, where it is absent,
// 15,000 random sentences with random tags (enough for 48 batches of 256).
func Corpus(b testing.TB) *corpus.Corpus {
	dir := os.Getenv("NERFLOW_BENCH_DATA")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "shared", "data", "conll03")
	}
	c, err := corpus.ReadTextLabels(filepath.Join(dir, "train_text.txt"), filepath.Join(dir, "train_label_true.txt"))
	if err == nil {
		return c
	}
	b.Logf("no CoNLL-2003 data (%v): random sentences", err)
	rng := rand.New(rand.NewPCG(1, 2))
	tags := []string{"O", "O", "O", "O", "O", "B-PER", "I-PER", "B-LOC", "B-ORG", "B-MISC"}
	c = &corpus.Corpus{}
	for range 15000 {
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

// Python is the interpreter of the reference; the benchmark is skipped
// when there is none.
func Python(b testing.TB) string {
	python := os.Getenv("NERFLOW_BENCH_PYTHON")
	if python == "" {
		python = "/usr/bin/python3"
	}
	if _, err := exec.LookPath(python); err != nil {
		b.Skipf("no %s for the PyTorch reference", python)
	}
	return python
}

// Threads is the libtorch thread counts to measure at: 1 and all cores, or
// NERFLOW_BENCH_THREADS.
func Threads(b testing.TB) []int {
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
	return threads
}

// Result is what the reference prints for a round.
type Result struct {
	Train      float64 `json:"train_tokens_per_sec"`
	Predict    float64 `json:"predict_tokens_per_sec"`
	TrainCPU   float64 `json:"train_tokens_per_cpu_sec"`
	PredictCPU float64 `json:"predict_tokens_per_cpu_sec"`
	PeakRSS    float64 `json:"peak_rss_bytes"`
	Threads    int     `json:"threads"`
	Torch      string  `json:"torch"`
}

// Reference is the running PyTorch side.
type Reference struct {
	// Params is the number of weights the reference's model has (0 where
	// the script does not say), for checking that both sides build the
	// same model.
	Params int64
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Scanner
}

// Start runs script (a path) on the batches file spec at the current
// kit.Threads, on device, and waits until it is ready.
func Start(b testing.TB, python, script, spec string, device gotch.Device) *Reference {
	dev := "cpu"
	if device.IsCuda() {
		dev = fmt.Sprintf("cuda:%d", device.CInt())
	}
	cmd := exec.Command(python, script, spec,
		"--warmup", strconv.Itoa(Warmup), "--threads", strconv.Itoa(kit.Threads()), "--device", dev)
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
		b.Fatalf("PyTorch reference %s: %v", filepath.Base(script), err)
	}
	r := &Reference{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	r.out.Buffer(nil, 1<<20)
	var ready struct {
		Ready  bool  `json:"ready"`
		Params int64 `json:"params"`
	}
	r.read(b, &ready)
	r.Params = ready.Params
	return r
}

func (r *Reference) read(b testing.TB, v any) {
	if !r.out.Scan() {
		r.Close()
		b.Fatalf("PyTorch reference ended early (%v)", r.out.Err())
	}
	if err := json.Unmarshal(r.out.Bytes(), v); err != nil {
		r.Close()
		b.Fatalf("PyTorch reference printed %q: %v", r.out.Bytes(), err)
	}
}

// Round times one pass of training and of prediction on the reference.
func (r *Reference) Round(b testing.TB) Result {
	if _, err := io.WriteString(r.in, "round\n"); err != nil {
		b.Fatalf("PyTorch reference: %v", err)
	}
	var res Result
	r.read(b, &res)
	return res
}

// Close ends the reference.
func (r *Reference) Close() {
	r.in.Close()
	r.cmd.Wait()
}

// Take keeps Warmup + steps of batches, failing the benchmark where there
// are fewer, and returns them and the timed ones (those after the
// warm-up).
func Take[T any](b testing.TB, batches []T, steps int) (all, timed []T) {
	if len(batches) < Warmup+steps {
		b.Fatalf("%d batches, want %d (%d to warm up, %d timed)", len(batches), Warmup+steps, Warmup, steps)
	}
	all = batches[:Warmup+steps]
	return all, all[Warmup:]
}

// Must turns a step that can fail into one for the rounds: a failure ends
// the benchmark.
func Must[T any](b testing.TB, f func(T) error) func(T) {
	return func(x T) {
		if err := f(x); err != nil {
			b.Fatal(err)
		}
	}
}

// WriteSpec writes v as JSON to a file in a temporary directory of b and
// returns its path.
func WriteSpec(b testing.TB, v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "batches.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		b.Fatal(err)
	}
	return path
}

// TimeTokens runs f and returns tokens per second and per CPU-second of
// this process.
func TimeTokens(tokens int, f func()) (wall, cpu float64) {
	c0, w0 := CPUTime(), time.Now()
	f()
	return float64(tokens) / time.Since(w0).Seconds(), float64(tokens) / (CPUTime() - c0).Seconds()
}

// CPUTime is the CPU time this process has used, all threads.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Rounds holds one side's throughput per round, by wall clock and by CPU
// time.
type Rounds struct{ Wall, CPU []float64 }

// Add records a round.
func (r *Rounds) Add(wall, cpu float64) {
	r.Wall, r.CPU = append(r.Wall, wall), append(r.CPU, cpu)
}

// Ratios is r against ref, round by round.
func (r Rounds) Ratios(ref Rounds) (wall, cpu []float64) {
	for i := range r.Wall {
		wall = append(wall, r.Wall[i]/ref.Wall[i])
		cpu = append(cpu, r.CPU[i]/ref.CPU[i])
	}
	return wall, cpu
}

// Median of xs (the mean of the middle two for an even count).
func Median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// FormatRatios writes xs with two decimals, space-separated.
func FormatRatios(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.FormatFloat(x, 'f', 2, 64)
	}
	return strings.Join(parts, " ")
}

// Compare takes turns, Go then PyTorch, for NERFLOW_BENCH_ROUNDS rounds:
// train and predict run one pass of the Go side over the timed batches
// (tokens tokens). It reports each side's median throughput, the median
// ratio (train-ratio, predict-ratio), the worst round's (-ratio-min), the
// median by CPU time (-cpu-ratio) and both sides' peak memory, and returns
// a line for the log: the ratio per round and the median tokens per
// CPU-second.
//
// The sides take turns so that each always starts right after the other
// (with the caches the other left), and each round's ratio compares two
// measurements taken seconds apart. (Turns in ABBA order were tried: a
// side's second pass in a row ran faster, and the median of an odd number
// of rounds favoured the side that went first.)
func Compare(b *testing.B, ref *Reference, tokens int, train, predict func()) (last Result, summary string) {
	var goTrain, goPredict, torchTrain, torchPredict Rounds
	b.ResetTimer()
	for range EnvInt(b, "NERFLOW_BENCH_ROUNDS", 5) {
		goTrain.Add(TimeTokens(tokens, train))
		goPredict.Add(TimeTokens(tokens, predict))
		last = ref.Round(b)
		torchTrain.Add(last.Train, last.TrainCPU)
		torchPredict.Add(last.Predict, last.PredictCPU)
	}
	b.StopTimer()
	b.ReportMetric(0, "ns/op")
	var perRound []string
	for _, r := range []struct {
		name      string
		gos, refs Rounds
	}{{"train", goTrain, torchTrain}, {"predict", goPredict, torchPredict}} {
		wall, cpu := r.gos.Ratios(r.refs)
		b.ReportMetric(Median(r.gos.Wall), "go-"+r.name+"-tok/s")
		b.ReportMetric(Median(r.refs.Wall), "torch-"+r.name+"-tok/s")
		b.ReportMetric(Median(wall), r.name+"-ratio")
		b.ReportMetric(slices.Min(wall), r.name+"-ratio-min")
		b.ReportMetric(Median(cpu), r.name+"-cpu-ratio")
		perRound = append(perRound, fmt.Sprintf("%s %s", r.name, FormatRatios(wall)))
	}
	b.ReportMetric(float64(kit.PeakResidentBytes())/(1<<20), "go-peak-MB")
	b.ReportMetric(last.PeakRSS/(1<<20), "torch-peak-MB")
	summary = fmt.Sprintf("PyTorch %s with %d thread(s); ratio per round: %s; median tokens per CPU-second: train %.0f vs %.0f, predict %.0f vs %.0f",
		last.Torch, last.Threads, strings.Join(perRound, ", "),
		Median(goTrain.CPU), Median(torchTrain.CPU), Median(goPredict.CPU), Median(torchPredict.CPU))
	return last, summary
}
