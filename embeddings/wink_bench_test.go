package embeddings

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
)

// packageNumber writes a number as the package writes them: five
// significant digits, "-0.085806".
func packageNumber(rng *rand.Rand) func(word, i int) string {
	return func(int, int) string { return strconv.FormatFloat(rng.NormFloat64()/4, 'g', 5, 64) }
}

// anyNumber writes a number in one of the forms a JSON writer may use:
// shortest, 8 decimals, an exponent, an integer, negative zero.
func anyNumber(rng *rand.Rand) func(word, i int) string {
	return func(_, i int) string {
		x := rng.NormFloat64()
		switch rng.IntN(6) {
		case 0:
			return strconv.FormatFloat(x, 'g', -1, 64)
		case 1:
			return strconv.FormatFloat(x*1e-7, 'e', 6, 64)
		case 2:
			return strconv.Itoa(int(x * 10))
		case 3:
			if i == 0 {
				return "-0"
			}
		}
		return strconv.FormatFloat(x, 'f', 8, 64)
	}
}

// winkByEncodingJSON decodes the vectors of a wink document with
// encoding/json: the reference both for the values and for the speed.
func winkByEncodingJSON(data []byte, dim int) (map[string][]float32, error) {
	var doc struct {
		Vectors map[string][]float64 `json:"vectors"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	out := make(map[string][]float32, len(doc.Vectors))
	for w, nums := range doc.Vectors {
		v := make([]float32, dim)
		for i := range v {
			v[i] = float32(nums[i])
		}
		out[w] = v
	}
	return out, nil
}

// ReadWink's numbers are encoding/json's, rounded to float32 the same way,
// whatever form they are written in: the table's bytes, and so the cache
// keys of the nodes that read it, do not depend on the reader.
func TestReadWinkNumbersMatchEncodingJSON(t *testing.T) {
	const n, dim = 500, 20
	data := []byte(syntheticWink(n, dim, anyNumber(rand.New(rand.NewPCG(1, 2)))))
	want, err := winkByEncodingJSON(data, dim)
	if err != nil {
		t.Fatal(err)
	}
	tab, err := ReadWink(bytes.NewReader(data), All())
	if err != nil {
		t.Fatal(err)
	}
	if tab.Len() != n {
		t.Fatalf("%d words, want %d", tab.Len(), n)
	}
	for i, w := range tab.Words {
		got := tab.Vector(i)
		for j := range got {
			if got[j] != want[w][j] {
				t.Fatalf("%s[%d] = %v, encoding/json reads %v", w, j, got[j], want[w][j])
			}
		}
	}
}

// BenchmarkReadWink reports ReadWink's time over encoding/json's for the
// same document, measured in the same run ("x-encoding-json": below 1 is
// faster).
func BenchmarkReadWink(b *testing.B) {
	const dim = 100
	data := []byte(syntheticWink(20000, dim, packageNumber(rand.New(rand.NewPCG(1, 2)))))
	b.SetBytes(int64(len(data)))
	var reference time.Duration
	for b.Loop() {
		start := time.Now()
		if _, err := winkByEncodingJSON(data, dim); err != nil {
			b.Fatal(err)
		}
		reference += time.Since(start)
		if _, err := ReadWink(bytes.NewReader(data), All()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed()-reference)/float64(reference), "x-encoding-json")
}
