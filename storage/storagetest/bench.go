package storagetest

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/nerflow/nerflow/storage"
)

// Reference does what a store's Put and Get do, without the store: a plain
// file write, a raw client call. Benchmarks report the store against it.
type Reference struct {
	// Put stores data under key.
	Put func(ctx context.Context, key string, data []byte) error
	// Get reads key whole into buf.
	Get func(ctx context.Context, key string, buf *bytes.Buffer) error
}

// Bench benchmarks Put and Get of size-byte objects through s against ref.
// Each iteration runs the reference and then the store on the same data, so
// both see the same machine load, and reports
//
//	ns/op     the store's time per operation
//	MB/s      the store's throughput
//	ref-MB/s  the reference's throughput
//	x-ref     the store's time as a multiple of the reference's (1 = no overhead)
func Bench(b *testing.B, s storage.Store, ref Reference, size int) {
	ctx := context.Background()
	data := Data(11, size)
	b.Run("Put", func(b *testing.B) {
		var refTime, storeTime time.Duration
		ops := 0
		for ; b.Loop(); ops++ {
			start := time.Now()
			if err := ref.Put(ctx, "bench/ref", data); err != nil {
				b.Fatal(err)
			}
			mid := time.Now()
			if _, err := s.Put(ctx, "bench/store", bytes.NewReader(data)); err != nil {
				b.Fatal(err)
			}
			refTime += mid.Sub(start)
			storeTime += time.Since(mid)
		}
		report(b, ops, size, refTime, storeTime)
	})
	b.Run("Get", func(b *testing.B) {
		if err := ref.Put(ctx, "bench/ref", data); err != nil {
			b.Fatal(err)
		}
		if _, err := storage.PutBytes(ctx, s, "bench/store", data); err != nil {
			b.Fatal(err)
		}
		var buf bytes.Buffer
		buf.Grow(size + 1)
		var refTime, storeTime time.Duration
		ops := 0
		for ; b.Loop(); ops++ {
			buf.Reset()
			start := time.Now()
			if err := ref.Get(ctx, "bench/ref", &buf); err != nil {
				b.Fatal(err)
			}
			mid := time.Now()
			buf.Reset()
			rc, _, err := s.Get(ctx, "bench/store")
			if err != nil {
				b.Fatal(err)
			}
			_, err = buf.ReadFrom(rc)
			rc.Close()
			if err != nil {
				b.Fatal(err)
			}
			refTime += mid.Sub(start)
			storeTime += time.Since(mid)
		}
		if buf.Len() != size {
			b.Fatalf("Get read %d bytes, want %d", buf.Len(), size)
		}
		report(b, ops, size, refTime, storeTime)
	})
}

func report(b *testing.B, ops, size int, refTime, storeTime time.Duration) {
	n := float64(ops)
	mb := float64(size) / 1e6
	b.ReportMetric(float64(storeTime.Nanoseconds())/n, "ns/op")
	b.ReportMetric(mb*n/storeTime.Seconds(), "MB/s")
	b.ReportMetric(mb*n/refTime.Seconds(), "ref-MB/s")
	b.ReportMetric(storeTime.Seconds()/refTime.Seconds(), "x-ref")
}
