package corpus

import (
	"bufio"
	"bytes"
	"fmt"
	"testing"
	"time"
)

// synthetic returns a CoNLL corpus of n ten-token sentences.
func synthetic(n int) []byte {
	var b bytes.Buffer
	for i := range n {
		for j := range 10 {
			tag := "O"
			if j%4 == 1 {
				tag = "B-PER"
			} else if j%4 == 2 {
				tag = "I-PER"
			}
			fmt.Fprintf(&b, "tok%d_%d %s\n", i%1000, j, tag)
		}
		b.WriteString("\n")
	}
	return b.Bytes()
}

// BenchmarkReadCoNLL reports reading speed and its cost relative to merely
// splitting the same bytes into lines, measured in the same run.
func BenchmarkReadCoNLL(b *testing.B) {
	data := synthetic(2000)
	b.SetBytes(int64(len(data)))
	var lineScan time.Duration
	for b.Loop() {
		start := time.Now()
		sc := bufio.NewScanner(bytes.NewReader(data))
		lines := 0
		for sc.Scan() {
			lines++
		}
		lineScan += time.Since(start)
		if _, err := Read(bytes.NewReader(data), "bench", FormatCoNLL); err != nil {
			b.Fatal(err)
		}
	}
	total := b.Elapsed()
	b.ReportMetric(float64(total-lineScan)/float64(lineScan), "x-line-scan")
}
