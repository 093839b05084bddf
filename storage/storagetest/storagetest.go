// Package storagetest is the conformance suite every storage driver passes:
// the same tests, run against each driver's real backend (a temporary
// directory, a real MinIO server), so that code written against
// storage.Store behaves the same on all of them.
//
//	func TestConformance(t *testing.T) {
//		storagetest.Run(t, storagetest.Harness{New: newStore, Corrupt: corrupt})
//	}
package storagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nerflow/nerflow/storage"
)

// Harness connects the suite to one driver.
type Harness struct {
	// New returns a new, empty store; the suite closes it.
	New func(t *testing.T) storage.Store
	// Corrupt changes the stored content of key behind the driver's back
	// (same length, one byte flipped) and keeps its recorded digest, so
	// that reading the object must fail.
	Corrupt func(t *testing.T, s storage.Store, key string)
	// LargeSize is the size of the large-object test, 12 MiB when zero;
	// drivers that upload in parts pick a size that spans several.
	LargeSize int
}

// Run runs the conformance suite.
func Run(t *testing.T, h Harness) {
	if h.New == nil || h.Corrupt == nil {
		t.Fatal("storagetest: Harness needs New and Corrupt")
	}
	if h.LargeSize == 0 {
		h.LargeSize = 12 << 20
	}
	tests := []struct {
		name string
		test func(*testing.T, storage.Store)
	}{
		{"RoundTrip", testRoundTrip},
		{"EmptyObject", testEmptyObject},
		{"UnicodeKey", testUnicodeKey},
		{"Large", func(t *testing.T, s storage.Store) { testLarge(t, s, h.LargeSize) }},
		{"UnknownSize", testUnknownSize},
		{"Stat", testStat},
		{"List", testList},
		{"Delete", testDelete},
		{"Overwrite", testOverwrite},
		{"IfAbsent", testIfAbsent},
		{"InvalidKeys", testInvalidKeys},
		{"InvalidMetadata", testInvalidMetadata},
		{"NotFound", testNotFound},
		{"DigestMismatch", func(t *testing.T, s storage.Store) { testDigestMismatch(t, s, h.Corrupt) }},
		{"ExpectedDigest", testExpectedDigest},
		{"ConcurrentReadersDuringPut", testConcurrentReaders},
		{"FailedPutPublishesNothing", testFailedPut},
		{"CancelledPutPublishesNothing", testCancelledPut},
		{"CancelledGet", testCancelledGet},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := h.New(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			tc.test(t, s)
		})
	}
}

// Data returns n deterministic pseudo-random bytes for seed.
func Data(seed uint64, n int) []byte {
	var key [32]byte
	key[0] = byte(seed)
	key[1] = byte(seed >> 8)
	b := make([]byte, n)
	_, _ = rand.NewChaCha8(key).Read(b)
	return b
}

func testRoundTrip(t *testing.T, s storage.Store) {
	ctx := context.Background()
	data := []byte("EU rejects German call to boycott British lamb .\n")
	before := time.Now()
	put, err := storage.PutBytes(ctx, s, "runs/r1/train.txt", data,
		storage.WithContentType("text/plain"), storage.WithMetadata("lang", "en"))
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	want := storage.ObjectInfo{Key: "runs/r1/train.txt", Size: int64(len(data)), Digest: storage.Digest(data),
		Metadata: map[string]string{"content-type": "text/plain", "lang": "en"}}
	checkInfo(t, "Put", put, want, before)

	got, info, err := storage.GetBytes(ctx, s, "runs/r1/train.txt")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if !bytes.Equal(got, data) {
		t.Errorf("Get returned %q, want %q", got, data)
	}
	checkInfo(t, "Get", info, want, before)
}

func testEmptyObject(t *testing.T, s storage.Store) {
	ctx := context.Background()
	before := time.Now()
	if _, err := storage.PutBytes(ctx, s, "empty", nil); err != nil {
		t.Fatalf("Put: %v", err)
	}
	got, info, err := storage.GetBytes(ctx, s, "empty")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if len(got) != 0 {
		t.Errorf("Get returned %d bytes, want 0", len(got))
	}
	checkInfo(t, "Get", info, storage.ObjectInfo{Key: "empty", Digest: storage.Digest(nil)}, before)
}

func testUnicodeKey(t *testing.T, s storage.Store) {
	ctx := context.Background()
	const key = "données/été 2024 (v2)+ü@ñ.txt"
	data := []byte("München")
	if _, err := storage.PutBytes(ctx, s, key, data); err != nil {
		t.Fatalf("Put: %v", err)
	}
	got, _, err := storage.GetBytes(ctx, s, key)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get = %q, %v; want %q", got, err, data)
	}
	checkKeys(t, s, "données/", []string{key})
}

func testLarge(t *testing.T, s storage.Store, size int) {
	ctx := context.Background()
	data := Data(1, size)
	info, err := s.Put(ctx, "big/blob.bin", bytes.NewReader(data))
	if err != nil {
		t.Fatalf("Put of %d bytes: %v", size, err)
	}
	if info.Size != int64(size) || info.Digest != storage.Digest(data) {
		t.Fatalf("Put returned size %d digest %s, want %d %s", info.Size, info.Digest, size, storage.Digest(data))
	}
	rc, _, err := s.Get(ctx, "big/blob.bin")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	defer rc.Close()
	// Read in odd-sized pieces to exercise the streaming path, not one
	// big read.
	var got bytes.Buffer
	if _, err := io.CopyBuffer(&got, struct{ io.Reader }{rc}, make([]byte, 7919)); err != nil {
		t.Fatalf("reading: %v", err)
	}
	if !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("read back %d bytes that differ from the %d written", got.Len(), size)
	}
}

// chunkedWriter feeds data into w in chunks of varying sizes, like a
// producer that does not know the total size.
func chunkedWriter(w *io.PipeWriter, data []byte) {
	sizes := []int{1, 4093, 65536, 300000, 17, 1 << 20}
	for i := 0; len(data) > 0; i++ {
		n := min(sizes[i%len(sizes)], len(data))
		if _, err := w.Write(data[:n]); err != nil {
			return
		}
		data = data[n:]
	}
	w.Close()
}

func testUnknownSize(t *testing.T, s storage.Store) {
	ctx := context.Background()
	data := Data(2, 3<<20+12345)
	pr, pw := io.Pipe()
	go chunkedWriter(pw, data)
	info, err := s.Put(ctx, "stream/out.bin", pr)
	if err != nil {
		t.Fatalf("Put from a pipe: %v", err)
	}
	if info.Size != int64(len(data)) || info.Digest != storage.Digest(data) {
		t.Fatalf("Put returned size %d digest %s, want %d %s", info.Size, info.Digest, len(data), storage.Digest(data))
	}
	got, _, err := storage.GetBytes(ctx, s, "stream/out.bin")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("content read back differs")
	}
}

func testStat(t *testing.T, s storage.Store) {
	ctx := context.Background()
	data := Data(3, 1000)
	before := time.Now()
	if _, err := storage.PutBytes(ctx, s, "stat/x", data, storage.WithMetadata("stage", "distant-labels")); err != nil {
		t.Fatalf("Put: %v", err)
	}
	info, err := s.Stat(ctx, "stat/x")
	if err != nil {
		t.Fatalf("Stat: %v", err)
	}
	checkInfo(t, "Stat", info, storage.ObjectInfo{Key: "stat/x", Size: 1000, Digest: storage.Digest(data),
		Metadata: map[string]string{"stage": "distant-labels"}}, before)
}

func testList(t *testing.T, s storage.Store) {
	ctx := context.Background()
	keys := []string{"b/x", "a/b/c", "ab", "a.b", "a/bc", "a/b/d/e", "a/b0"}
	for _, k := range keys {
		if _, err := storage.PutBytes(ctx, s, k, []byte(k)); err != nil {
			t.Fatalf("Put %q: %v", k, err)
		}
	}
	// Sorted by bytes: '.' < '/' < '0' < 'b'.
	checkKeys(t, s, "", []string{"a.b", "a/b/c", "a/b/d/e", "a/b0", "a/bc", "ab", "b/x"})
	checkKeys(t, s, "a", []string{"a.b", "a/b/c", "a/b/d/e", "a/b0", "a/bc", "ab"})
	checkKeys(t, s, "a/", []string{"a/b/c", "a/b/d/e", "a/b0", "a/bc"})
	checkKeys(t, s, "a/b", []string{"a/b/c", "a/b/d/e", "a/b0", "a/bc"})
	checkKeys(t, s, "a/b/", []string{"a/b/c", "a/b/d/e"})
	checkKeys(t, s, "a/b/d/e", []string{"a/b/d/e"})
	checkKeys(t, s, "a/b/d/e/", nil)
	checkKeys(t, s, "b/x/", nil)
	checkKeys(t, s, "c", nil)
	checkKeys(t, s, "zz/top/", nil)

	infos, err := s.List(ctx, "a/b/")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	for _, info := range infos {
		if info.Size != int64(len(info.Key)) || info.Digest != storage.Digest([]byte(info.Key)) {
			t.Errorf("List entry %q: size %d digest %s, want %d %s", info.Key, info.Size, info.Digest,
				len(info.Key), storage.Digest([]byte(info.Key)))
		}
	}
}

func testDelete(t *testing.T, s storage.Store) {
	ctx := context.Background()
	for _, k := range []string{"d/x", "d/xy", "d/x2/y"} {
		if _, err := storage.PutBytes(ctx, s, k, []byte(k)); err != nil {
			t.Fatalf("Put %q: %v", k, err)
		}
	}
	if err := s.Delete(ctx, "d/x"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := s.Stat(ctx, "d/x"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("Stat after Delete: %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, "d/x"); err != nil {
		t.Errorf("second Delete: %v, want nil", err)
	}
	if err := s.Delete(ctx, "never/was"); err != nil {
		t.Errorf("Delete of a missing key: %v, want nil", err)
	}
	// A prefix of other keys is not an object: deleting it removes nothing.
	if err := s.Delete(ctx, "d/x2"); err != nil {
		t.Errorf("Delete of a prefix: %v, want nil", err)
	}
	checkKeys(t, s, "d/", []string{"d/x2/y", "d/xy"})
	if err := s.Delete(ctx, "d/x2/y"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	checkKeys(t, s, "", []string{"d/xy"})
}

func testOverwrite(t *testing.T, s storage.Store) {
	ctx := context.Background()
	if _, err := storage.PutBytes(ctx, s, "o/k", []byte("first version"), storage.WithMetadata("v", "1"), storage.WithMetadata("old", "yes")); err != nil {
		t.Fatalf("Put: %v", err)
	}
	second := Data(4, 5000)
	if _, err := storage.PutBytes(ctx, s, "o/k", second, storage.WithMetadata("v", "2")); err != nil {
		t.Fatalf("second Put: %v", err)
	}
	got, info, err := storage.GetBytes(ctx, s, "o/k")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if !bytes.Equal(got, second) {
		t.Error("Get after overwrite does not return the second version")
	}
	if info.Digest != storage.Digest(second) || !equalMetadata(info.Metadata, map[string]string{"v": "2"}) {
		t.Errorf("Get after overwrite: digest %s metadata %v, want %s map[v:2]", info.Digest, info.Metadata, storage.Digest(second))
	}
	checkKeys(t, s, "o/", []string{"o/k"})
}

// InvalidKeys are keys every driver must refuse.
var InvalidKeys = []string{
	"", "/abs", "/", "../x", "a/../../x", "a/..", "..", ".", "./a", "a/./b", "a//b", "a/", "a\\b", "..\\x",
	"a\x00b", "a\nb", "\xff\xfe", ".nerflow-tmp-1", "a/.nerflow/b", strings.Repeat("k", 256),
	strings.Repeat("abc/", 256) + "x",
}

func testInvalidKeys(t *testing.T, s storage.Store) {
	ctx := context.Background()
	for _, key := range InvalidKeys {
		if _, err := storage.PutBytes(ctx, s, key, []byte("x")); !errors.Is(err, storage.ErrInvalidKey) {
			t.Errorf("Put(%q) = %v, want ErrInvalidKey", key, err)
		}
		if _, _, err := s.Get(ctx, key); !errors.Is(err, storage.ErrInvalidKey) {
			t.Errorf("Get(%q) = %v, want ErrInvalidKey", key, err)
		}
		if _, err := s.Stat(ctx, key); !errors.Is(err, storage.ErrInvalidKey) {
			t.Errorf("Stat(%q) = %v, want ErrInvalidKey", key, err)
		}
		if err := s.Delete(ctx, key); !errors.Is(err, storage.ErrInvalidKey) {
			t.Errorf("Delete(%q) = %v, want ErrInvalidKey", key, err)
		}
	}
	for _, prefix := range []string{"/", "/abs", "../", "a/../", "a//", "a\\", "./"} {
		if _, err := s.List(ctx, prefix); !errors.Is(err, storage.ErrInvalidKey) {
			t.Errorf("List(%q) = %v, want ErrInvalidKey", prefix, err)
		}
	}
	checkKeys(t, s, "", nil)
}

func testInvalidMetadata(t *testing.T, s storage.Store) {
	ctx := context.Background()
	for i, opt := range []storage.PutOption{
		storage.WithMetadata("Upper", "x"),
		storage.WithMetadata("with space", "x"),
		storage.WithMetadata("nerflow-digest", "sha256:00"),
		storage.WithMetadata("k", "line\nbreak"),
		storage.WithMetadata("k", "é"),
		storage.WithMetadata("k", strings.Repeat("v", storage.MaxMetadataSize)),
		storage.WithDigest("md5:abc"),
	} {
		if _, err := storage.PutBytes(ctx, s, "m/k", []byte("x"), opt); err == nil {
			t.Errorf("Put with invalid option #%d succeeded, want an error", i)
		}
	}
	checkKeys(t, s, "", nil)
}

func testNotFound(t *testing.T, s storage.Store) {
	ctx := context.Background()
	if _, err := storage.PutBytes(ctx, s, "dir/file", []byte("x")); err != nil {
		t.Fatalf("Put: %v", err)
	}
	// "dir" is only a prefix, and "dir/file/x" lies under an object.
	for _, key := range []string{"missing", "dir", "dir/other", "dir/file/x", "dir/fil"} {
		if _, _, err := s.Get(ctx, key); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("Get(%q) = %v, want ErrNotFound", key, err)
		}
		if _, err := s.Stat(ctx, key); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("Stat(%q) = %v, want ErrNotFound", key, err)
		}
	}
}

func testDigestMismatch(t *testing.T, s storage.Store, corrupt func(*testing.T, storage.Store, string)) {
	ctx := context.Background()
	data := Data(5, 100_000)
	for _, k := range []string{"c/bad", "c/good"} {
		if _, err := storage.PutBytes(ctx, s, k, data); err != nil {
			t.Fatalf("Put: %v", err)
		}
	}
	corrupt(t, s, "c/bad")

	rc, info, err := s.Get(ctx, "c/bad")
	if err != nil {
		t.Fatalf("Get of a corrupted object failed early (%v); the mismatch should surface while reading", err)
	}
	if info.Digest != storage.Digest(data) {
		t.Fatalf("Corrupt changed the recorded digest to %s; it must keep %s", info.Digest, storage.Digest(data))
	}
	n, err := io.Copy(io.Discard, rc)
	rc.Close()
	if !errors.Is(err, storage.ErrDigestMismatch) {
		t.Fatalf("reading a corrupted object: %d bytes, err %v; want ErrDigestMismatch", n, err)
	}
	if _, _, err := storage.GetBytes(ctx, s, "c/bad"); !errors.Is(err, storage.ErrDigestMismatch) {
		t.Errorf("GetBytes of a corrupted object: %v, want ErrDigestMismatch", err)
	}
	var v any
	if _, err := storage.GetJSON(ctx, s, "c/bad", &v); !errors.Is(err, storage.ErrDigestMismatch) {
		t.Errorf("GetJSON of a corrupted object: %v, want ErrDigestMismatch", err)
	}
	if got, _, err := storage.GetBytes(ctx, s, "c/good"); err != nil || !bytes.Equal(got, data) {
		t.Errorf("the intact neighbour: %v", err)
	}
}

func testExpectedDigest(t *testing.T, s storage.Store) {
	ctx := context.Background()
	data := Data(6, 70_000)
	if _, err := storage.PutBytes(ctx, s, "e/ok", data, storage.WithDigest(storage.Digest(data))); err != nil {
		t.Errorf("Put with the right digest: %v", err)
	}
	_, err := storage.PutBytes(ctx, s, "e/wrong", data, storage.WithDigest(storage.Digest([]byte("other"))))
	if !errors.Is(err, storage.ErrDigestMismatch) {
		t.Errorf("Put with a wrong digest: %v, want ErrDigestMismatch", err)
	}
	checkKeys(t, s, "e/", []string{"e/ok"})
}

// slowReader delivers data in small chunks with pauses, so that a Put of it
// takes long enough for concurrent readers to run many times meanwhile.
type slowReader struct {
	data  []byte
	chunk int
	pause time.Duration
}

func (r *slowReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	time.Sleep(r.pause)
	n := copy(p[:min(len(p), r.chunk)], r.data)
	r.data = r.data[n:]
	return n, nil
}

func testConcurrentReaders(t *testing.T, s storage.Store) {
	ctx := context.Background()
	versions := [][]byte{Data(7, 1<<20), Data(8, 1<<20+333)}
	if _, err := storage.PutBytes(ctx, s, "cc/k", versions[0]); err != nil {
		t.Fatalf("Put: %v", err)
	}
	var (
		stop     atomic.Bool
		reads    atomic.Int64
		notFound atomic.Int64
		wg       sync.WaitGroup
		errs     = make(chan error, 100)
	)
	reader := func(key string, fresh bool) {
		defer wg.Done()
		for !stop.Load() {
			got, _, err := storage.GetBytes(ctx, s, key)
			switch {
			case fresh && errors.Is(err, storage.ErrNotFound):
				notFound.Add(1)
				continue
			case err != nil:
				errs <- fmt.Errorf("reading %s during a Put: %w", key, err)
				return
			case !bytes.Equal(got, versions[0]) && !bytes.Equal(got, versions[1]):
				errs <- fmt.Errorf("reading %s during a Put: got %d bytes that are neither version", key, len(got))
				return
			}
			reads.Add(1)
		}
	}
	for range 2 {
		wg.Add(2)
		go reader("cc/k", false)
		go reader("cc/fresh", true)
	}
	for round := range 4 {
		v := versions[(round+1)%2]
		// Readers of the fresh key see it missing, then whole.
		if err := s.Delete(ctx, "cc/fresh"); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		for _, key := range []string{"cc/k", "cc/fresh"} {
			if _, err := s.Put(ctx, key, &slowReader{data: v, chunk: 64 << 10, pause: 2 * time.Millisecond}); err != nil {
				t.Errorf("Put: %v", err)
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if reads.Load() == 0 || notFound.Load() == 0 {
		t.Errorf("readers made %d complete reads and saw %d not-found; the test needs both to mean anything", reads.Load(), notFound.Load())
	}
	t.Logf("%d complete reads, %d not-found reads of the fresh key during 8 Puts", reads.Load(), notFound.Load())
}

// failingReader returns n bytes of data and then err.
type failingReader struct {
	data []byte
	err  error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, r.err
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

var errSource = errors.New("source broke")

func testFailedPut(t *testing.T, s storage.Store) {
	ctx := context.Background()
	old := []byte("the previous version")
	if _, err := storage.PutBytes(ctx, s, "f/k", old); err != nil {
		t.Fatalf("Put: %v", err)
	}
	for _, key := range []string{"f/k", "f/new"} {
		_, err := s.Put(ctx, key, &failingReader{data: Data(9, 200_000), err: errSource})
		if !errors.Is(err, errSource) {
			t.Errorf("Put(%q) from a failing reader: %v, want the reader's error", key, err)
		}
	}
	got, _, err := storage.GetBytes(ctx, s, "f/k")
	if err != nil || !bytes.Equal(got, old) {
		t.Errorf("after a failed overwrite, Get = %q, %v; want the previous version", got, err)
	}
	checkKeys(t, s, "", []string{"f/k"})
}

// cancellingReader is an endless stream that cancels its Put's context once
// it has delivered after bytes, as a user interrupting a long upload would.
type cancellingReader struct {
	after  int
	sent   int
	cancel context.CancelFunc
}

func (r *cancellingReader) Read(p []byte) (int, error) {
	if r.sent >= r.after {
		r.cancel()
	}
	n := min(len(p), 32<<10)
	for i := range p[:n] {
		p[i] = byte(r.sent + i)
	}
	r.sent += n
	return n, nil
}

func testCancelledPut(t *testing.T, s storage.Store) {
	old := []byte("the previous version")
	if _, err := storage.PutBytes(context.Background(), s, "x/k", old); err != nil {
		t.Fatalf("Put: %v", err)
	}
	for _, key := range []string{"x/k", "x/new"} {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := s.Put(ctx, key, &cancellingReader{after: 1 << 20, cancel: cancel})
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("cancelled Put(%q): %v, want context.Canceled", key, err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("Put(%q) of an endless stream did not return within a minute of its cancellation", key)
		}
		cancel()
	}
	got, _, err := storage.GetBytes(context.Background(), s, "x/k")
	if err != nil || !bytes.Equal(got, old) {
		t.Errorf("after a cancelled overwrite, Get = %q, %v; want the previous version", got, err)
	}
	checkKeys(t, s, "", []string{"x/k"})
}

func testCancelledGet(t *testing.T, s storage.Store) {
	if _, err := storage.PutBytes(context.Background(), s, "g/k", Data(10, 1<<20)); err != nil {
		t.Fatalf("Put: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rc, _, err := s.Get(ctx, "g/k")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	defer rc.Close()
	if _, err := io.ReadFull(rc, make([]byte, 1000)); err != nil {
		t.Fatalf("first read: %v", err)
	}
	cancel()
	if _, err := io.Copy(io.Discard, rc); !errors.Is(err, context.Canceled) {
		t.Errorf("reading after cancel: %v, want context.Canceled", err)
	}
}

// checkInfo compares info with want; ModTime must lie between before
// (less a second: S3 keeps whole seconds) and now (plus a second of clock
// skew with the server).
func checkInfo(t *testing.T, op string, info, want storage.ObjectInfo, before time.Time) {
	t.Helper()
	if info.Key != want.Key || info.Size != want.Size || info.Digest != want.Digest {
		t.Errorf("%s: key %q size %d digest %s, want %q %d %s", op, info.Key, info.Size, info.Digest, want.Key, want.Size, want.Digest)
	}
	if !equalMetadata(info.Metadata, want.Metadata) {
		t.Errorf("%s: metadata %v, want %v", op, info.Metadata, want.Metadata)
	}
	if info.ModTime.Before(before.Add(-time.Second)) || info.ModTime.After(time.Now().Add(time.Second)) {
		t.Errorf("%s: ModTime %v is not between %v and now", op, info.ModTime, before)
	}
}

func equalMetadata(a, b map[string]string) bool {
	return len(a) == len(b) && maps.Equal(a, b)
}

func checkKeys(t *testing.T, s storage.Store, prefix string, want []string) {
	t.Helper()
	infos, err := s.List(context.Background(), prefix)
	if err != nil {
		t.Errorf("List(%q): %v", prefix, err)
		return
	}
	got := make([]string, len(infos))
	for i, info := range infos {
		got[i] = info.Key
	}
	if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
		t.Errorf("List(%q) = %q, want %q", prefix, got, want)
	}
}

// testIfAbsent: of writers racing to create one key with IfAbsent, exactly
// one publishes; the others fail with ErrExists and change nothing.
func testIfAbsent(t *testing.T, s storage.Store) {
	ctx := context.Background()
	const writers = 8
	errs := make(chan error, writers)
	for i := range writers {
		go func() {
			_, err := storage.PutBytes(ctx, s, "nodes/k.json", []byte{byte('a' + i)}, storage.IfAbsent())
			errs <- err
		}()
	}
	won := 0
	for range writers {
		switch err := <-errs; {
		case err == nil:
			won++
		case !errors.Is(err, storage.ErrExists):
			t.Errorf("a losing IfAbsent Put: %v, want ErrExists", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d IfAbsent Puts published, want exactly 1", won)
	}
	first, _, err := storage.GetBytes(ctx, s, "nodes/k.json")
	if err != nil || len(first) != 1 {
		t.Fatalf("the winner's object: %q, %v", first, err)
	}
	if _, err := storage.PutBytes(ctx, s, "nodes/k.json", []byte("later"), storage.IfAbsent()); !errors.Is(err, storage.ErrExists) {
		t.Errorf("IfAbsent over an object: %v, want ErrExists", err)
	}
	if got, _, _ := storage.GetBytes(ctx, s, "nodes/k.json"); string(got) != string(first) {
		t.Errorf("after a refused IfAbsent Put the object holds %q, want %q", got, first)
	}
	// Without the option, Put replaces as before; after a Delete, IfAbsent
	// publishes again.
	if _, err := storage.PutBytes(ctx, s, "nodes/k.json", []byte("z")); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "nodes/k.json"); err != nil {
		t.Fatal(err)
	}
	if _, err := storage.PutBytes(ctx, s, "nodes/k.json", []byte("again"), storage.IfAbsent()); err != nil {
		t.Errorf("IfAbsent after Delete: %v", err)
	}
	if objs, _ := s.List(ctx, "nodes/"); len(objs) != 1 {
		t.Errorf("nodes/ lists %d objects, want 1 (no staging leftovers)", len(objs))
	}
}
