package s3store_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/nerflow/nerflow/internal/testenv"
	"github.com/nerflow/nerflow/storage"
	"github.com/nerflow/nerflow/storage/s3store"
	"github.com/nerflow/nerflow/storage/storagetest"
)

const testBucket = "nerflow-storage-test"

// testPartSize is S3's smallest part size, so that the large-object test
// uploads several parts without needing a huge object.
const testPartSize = s3store.MinPartSize

// newStore opens a store on the test MinIO server under a fresh prefix, so
// every test starts empty.
func newStore(t *testing.T) storage.Store {
	t.Helper()
	return open(t, testBucket, "t-"+randomHex())
}

func open(t *testing.T, bucket, prefix string) *s3store.Store {
	t.Helper()
	env := testenv.S3(t)
	s, err := s3store.Open(context.Background(), s3store.Config{
		Endpoint: env.Endpoint, AccessKey: env.AccessKey, SecretKey: env.SecretKey,
		Bucket: bucket, Prefix: prefix, PartSize: testPartSize, SpoolDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// corrupt rewrites the object with minio-go directly, one byte flipped and
// its metadata (the recorded digest included) kept.
func corrupt(t *testing.T, s storage.Store, key string) {
	t.Helper()
	ctx := context.Background()
	st := s.(*s3store.Store)
	bucket, object, err := st.Location(key)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := st.Client().GetObject(ctx, bucket, object, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(obj)
	if err != nil {
		t.Fatal(err)
	}
	info, err := obj.Stat()
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	meta := map[string]string{}
	for k, v := range info.UserMetadata {
		meta["x-amz-meta-"+k] = v
	}
	if _, err := st.Client().PutObject(ctx, bucket, object, bytes.NewReader(data), int64(len(data)),
		minio.PutObjectOptions{UserMetadata: meta}); err != nil {
		t.Fatal(err)
	}
}

func TestConformance(t *testing.T) {
	storagetest.Run(t, storagetest.Harness{New: newStore, Corrupt: corrupt, LargeSize: 2*testPartSize + 12345})
}

// TestWholeBucket runs the suite on a store without a prefix, in a bucket
// that Open has to create.
func TestWholeBucket(t *testing.T) {
	storagetest.Run(t, storagetest.Harness{
		New:     func(t *testing.T) storage.Store { return open(t, "nerflow-"+randomHex(), "") },
		Corrupt: corrupt,
	})
}

func TestOpenURL(t *testing.T) {
	env := testenv.S3(t)
	t.Setenv(s3store.EnvAccessKey, env.AccessKey)
	t.Setenv(s3store.EnvSecretKey, env.SecretKey)
	ctx := context.Background()
	prefix := "url-" + randomHex()
	s, err := storage.Open(ctx, "s3://"+testBucket+"/"+prefix+"?endpoint="+env.Endpoint+"&secure=false")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := storage.PutBytes(ctx, s, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	// The key lands under the URL's prefix.
	_, object, _ := s.(*s3store.Store).Location("k")
	if object != prefix+"/k" {
		t.Errorf("object name %q, want %q", object, prefix+"/k")
	}

	t.Setenv(s3store.EnvSecretKey, "wrong-secret")
	_, err = storage.Open(ctx, "s3://"+testBucket+"?endpoint="+env.Endpoint+"&secure=false")
	if err == nil {
		t.Error("Open with a wrong secret key succeeded")
	}
}

// TestForeignObject checks that an object written around the driver, with
// no recorded digest, is refused rather than served unverified.
func TestForeignObject(t *testing.T) {
	ctx := context.Background()
	s := newStore(t).(*s3store.Store)
	bucket, object, _ := s.Location("foreign")
	if _, err := s.Client().PutObject(ctx, bucket, object, strings.NewReader("x"), 1, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(ctx, "foreign"); !errors.Is(err, storage.ErrDigestMismatch) {
		t.Errorf("Get: %v, want ErrDigestMismatch", err)
	}
	if _, err := s.List(ctx, ""); !errors.Is(err, storage.ErrDigestMismatch) {
		t.Errorf("List: %v, want ErrDigestMismatch", err)
	}
}

// TestContentType checks that the content-type metadata is also the object's
// HTTP Content-Type, which presigned downloads and browsers see.
func TestContentType(t *testing.T) {
	ctx := context.Background()
	s := newStore(t).(*s3store.Store)
	if _, err := storage.PutJSON(ctx, s, "r.json", map[string]int{"f1": 1}); err != nil {
		t.Fatal(err)
	}
	bucket, object, _ := s.Location("r.json")
	oi, err := s.Client().StatObject(ctx, bucket, object, minio.StatObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if oi.ContentType != "application/json" {
		t.Errorf("Content-Type %q, want application/json", oi.ContentType)
	}
}

// TestLargePutIsMultipartAndSpoolIsRemoved checks the path of objects
// larger than a part: spooled to a local file, uploaded in parts (S3 gives
// multipart objects an ETag ending in "-<parts>"), spool file removed.
func TestLargePutIsMultipartAndSpoolIsRemoved(t *testing.T) {
	ctx := context.Background()
	env := testenv.S3(t)
	spool := t.TempDir()
	s, err := s3store.Open(ctx, s3store.Config{
		Endpoint: env.Endpoint, AccessKey: env.AccessKey, SecretKey: env.SecretKey,
		Bucket: testBucket, Prefix: "t-" + randomHex(), PartSize: testPartSize, SpoolDir: spool,
	})
	if err != nil {
		t.Fatal(err)
	}
	data := storagetest.Data(1, 2*testPartSize+1)
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeInPieces(pw, data)) }()
	if _, err := s.Put(ctx, "big", pr); err != nil {
		t.Fatal(err)
	}
	bucket, object, _ := s.Location("big")
	oi, err := s.Client().StatObject(ctx, bucket, object, minio.StatObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(oi.ETag, "-3") {
		t.Errorf("ETag %q: want a 3-part multipart upload", oi.ETag)
	}
	entries, err := os.ReadDir(spool)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("spool file left behind: %s", e.Name())
	}
	got, _, err := storage.GetBytes(ctx, s, "big")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back: %d bytes, %v", len(got), err)
	}
}

// writeInPieces writes data to w in 1 MiB pieces.
func writeInPieces(w io.Writer, data []byte) error {
	for len(data) > 0 {
		n := min(len(data), 1<<20)
		if _, err := w.Write(data[:n]); err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

func randomHex() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// BenchmarkS3 compares the store with raw minio-go PutObject (size known,
// no metadata) and GetObject calls on the same server.
func BenchmarkS3(b *testing.B) {
	env := testenv.S3(b)
	ctx := context.Background()
	prefix := "bench-" + randomHex()
	s, err := s3store.Open(ctx, s3store.Config{
		Endpoint: env.Endpoint, AccessKey: env.AccessKey, SecretKey: env.SecretKey,
		Bucket: testBucket, Prefix: prefix,
	})
	if err != nil {
		b.Fatal(err)
	}
	client := s.Client()
	ref := storagetest.Reference{
		Put: func(ctx context.Context, key string, data []byte) error {
			_, err := client.PutObject(ctx, testBucket, prefix+"-ref/"+key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{})
			return err
		},
		Get: func(ctx context.Context, key string, buf *bytes.Buffer) error {
			obj, err := client.GetObject(ctx, testBucket, prefix+"-ref/"+key, minio.GetObjectOptions{})
			if err != nil {
				return err
			}
			defer obj.Close()
			_, err = buf.ReadFrom(obj)
			return err
		},
	}
	storagetest.Bench(b, s, ref, 8<<20)
}
