package storage_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/nerflow/nerflow/storage"
	"github.com/nerflow/nerflow/storage/fsstore"
	"github.com/nerflow/nerflow/storage/storagetest"
)

func TestValidateKey(t *testing.T) {
	for _, key := range []string{
		"a", "runs/abc/manifest.json", "a.b/c-d_e", "données/été 2024.txt", "x/.hidden", "..a/b..",
		"a/nerflow", strings.Repeat("k", storage.MaxSegmentLen), strings.Repeat("abc/", 255) + "wxyz",
	} {
		if err := storage.ValidateKey(key); err != nil {
			t.Errorf("ValidateKey(%q) = %v, want nil", key, err)
		}
	}
	for _, key := range storagetest.InvalidKeys {
		err := storage.ValidateKey(key)
		if !errors.Is(err, storage.ErrInvalidKey) {
			t.Errorf("ValidateKey(%q) = %v, want ErrInvalidKey", key, err)
		}
	}
	// The error says what is wrong.
	for key, problem := range map[string]string{
		"a//b": "empty path segment", "../x": `".." path segment`, "/abs": "absolute path", "a/": "trailing slash",
		"a\\b": "backslash at byte 1", "a\tb": "control character U+0009 at byte 1",
	} {
		if err := storage.ValidateKey(key); err == nil || !strings.Contains(err.Error(), problem) {
			t.Errorf("ValidateKey(%q) = %v, want it to say %q", key, err, problem)
		}
	}
}

func TestValidatePrefix(t *testing.T) {
	for _, p := range []string{"", "a", "a/", "a/b", "a/b/", "runs/.", "runs/..", "runs/.nerf"} {
		if err := storage.ValidatePrefix(p); err != nil {
			t.Errorf("ValidatePrefix(%q) = %v, want nil", p, err)
		}
	}
	for _, p := range []string{"/", "/a", "a//", "../", "a/../b", "./", "a\\", "a\x00", ".nerflow-tmp/"} {
		if err := storage.ValidatePrefix(p); !errors.Is(err, storage.ErrInvalidKey) {
			t.Errorf("ValidatePrefix(%q) = %v, want ErrInvalidKey", p, err)
		}
	}
}

func TestValidateDigest(t *testing.T) {
	good := storage.Digest([]byte("x"))
	if err := storage.ValidateDigest(good); err != nil {
		t.Errorf("ValidateDigest(%q) = %v", good, err)
	}
	for _, d := range []string{"", "sha256:", "md5:" + good[7:], strings.ToUpper(good), good[:70], good + "0", "sha256:" + strings.Repeat("g", 64)} {
		if err := storage.ValidateDigest(d); err == nil {
			t.Errorf("ValidateDigest(%q) = nil, want an error", d)
		}
	}
	// The well-known digest of the empty string.
	if got := storage.Digest(nil); got != "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Errorf("Digest(nil) = %s", got)
	}
}

func TestVerifyReader(t *testing.T) {
	data := []byte("Japan began the defence of their Asian Cup title")
	info := storage.ObjectInfo{Key: "k", Size: int64(len(data)), Digest: storage.Digest(data)}
	read := func(content string, info storage.ObjectInfo) (string, error) {
		rc := storage.VerifyReader(context.Background(), io.NopCloser(iotest.HalfReader(strings.NewReader(content))), info)
		b, err := io.ReadAll(rc)
		return string(b), err
	}
	if got, err := read(string(data), info); err != nil || got != string(data) {
		t.Errorf("intact content: %q, %v", got, err)
	}
	flipped := strings.Replace(string(data), "Asian", "asian", 1)
	for name, content := range map[string]string{"flipped": flipped, "short": string(data[:10]), "long": string(data) + "!"} {
		if _, err := read(content, info); !errors.Is(err, storage.ErrDigestMismatch) {
			t.Errorf("%s content: %v, want ErrDigestMismatch", name, err)
		}
	}
	bad := info
	bad.Digest = "sha256:nothex"
	if _, err := read(string(data), bad); !errors.Is(err, storage.ErrDigestMismatch) {
		t.Errorf("malformed recorded digest: %v, want ErrDigestMismatch", err)
	}

	// Errors are sticky: a second Read after the mismatch fails again.
	rc := storage.VerifyReader(context.Background(), io.NopCloser(strings.NewReader(flipped)), info)
	io.ReadAll(rc)
	if n, err := rc.Read(make([]byte, 10)); n != 0 || !errors.Is(err, storage.ErrDigestMismatch) {
		t.Errorf("Read after a mismatch: %d, %v; want 0, ErrDigestMismatch", n, err)
	}
}

func TestPutOptions(t *testing.T) {
	o, err := storage.NewPutOptions(storage.WithContentType("text/plain"), storage.WithMetadata("run-id", "r1"))
	if err != nil {
		t.Fatal(err)
	}
	if o.Metadata["content-type"] != "text/plain" || o.Metadata["run-id"] != "r1" {
		t.Errorf("metadata %v", o.Metadata)
	}
	for _, opts := range [][]storage.PutOption{
		{storage.WithMetadata("", "x")},
		{storage.WithMetadata("-x", "x")},
		{storage.WithMetadata("a_b", "x")},
		{storage.WithMetadata(strings.Repeat("k", 65), "x")},
		{storage.WithMetadata("nerflow-x", "x")},
		{storage.WithMetadata("k", "\x7f")},
		{storage.WithMetadata("a", strings.Repeat("v", 1500)), storage.WithMetadata("b", strings.Repeat("v", 600))},
		{storage.WithDigest("sha256:abc")},
	} {
		if _, err := storage.NewPutOptions(opts...); err == nil {
			t.Errorf("NewPutOptions accepted %+v", opts)
		}
	}
}

func TestOpen(t *testing.T) {
	ctx := context.Background()
	for url, problem := range map[string]string{
		".nerflow/store":   "not a store URL",
		"://x":             "not a store URL",
		"gs://bucket/path": `no driver for scheme "gs" (registered: file`,
	} {
		if _, err := storage.Open(ctx, url); err == nil || !strings.Contains(err.Error(), problem) {
			t.Errorf("Open(%q) = %v, want an error saying %q", url, err, problem)
		}
	}
	dir := t.TempDir()
	s, err := storage.Open(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.(*fsstore.Store).Root(); got != dir {
		t.Errorf("opened %s, want %s", got, dir)
	}
}

func TestRedact(t *testing.T) {
	got := storage.Redact("s3://b/p?endpoint=h:1&access_key=AK&secret_key=SECRET&session_token=TOK")
	if want := "s3://b/p?endpoint=h:1&access_key=AK&secret_key=xxxxx&session_token=xxxxx"; got != want {
		t.Errorf("Redact = %s, want %s", got, want)
	}
}

func TestJSONHelpers(t *testing.T) {
	ctx := context.Background()
	s, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	type report struct {
		F1    float64        `json:"f1"`
		Types map[string]int `json:"types"`
	}
	in := report{F1: 0.8125, Types: map[string]int{"PER": 3, "LOC": 1}}
	info, err := storage.PutJSON(ctx, s, "r/metrics.json", in)
	if err != nil {
		t.Fatal(err)
	}
	if info.Metadata["content-type"] != "application/json" {
		t.Errorf("content type %q", info.Metadata["content-type"])
	}
	raw, _, err := storage.GetBytes(ctx, s, "r/metrics.json")
	if err != nil {
		t.Fatal(err)
	}
	if want := "{\n  \"f1\": 0.8125,\n  \"types\": {\n    \"LOC\": 1,\n    \"PER\": 3\n  }\n}\n"; string(raw) != want {
		t.Errorf("stored %q, want %q", raw, want)
	}
	var out report
	if _, err := storage.GetJSON(ctx, s, "r/metrics.json", &out); err != nil {
		t.Fatal(err)
	}
	if out.F1 != in.F1 || out.Types["PER"] != 3 || out.Types["LOC"] != 1 {
		t.Errorf("GetJSON = %+v, want %+v", out, in)
	}

	if _, err := storage.PutBytes(ctx, s, "r/bad.json", []byte("{\n  \"f1\": 0.5,\n  \"types\": [1]\n}\n")); err != nil {
		t.Fatal(err)
	}
	_, err = storage.GetJSON(ctx, s, "r/bad.json", &out)
	if err == nil || !strings.Contains(err.Error(), `"r/bad.json": line 3, column 13`) {
		t.Errorf("GetJSON of a mistyped field: %v, want the key, line and column", err)
	}
	if _, err := storage.GetJSON(ctx, s, "r/missing.json", &out); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("GetJSON of a missing key: %v", err)
	}
}
