package engine_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/nerflow/nerflow/internal/testenv"
	"github.com/nerflow/nerflow/pipeline/engine"
	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/storage"
	"github.com/nerflow/nerflow/storage/artifact"
	"github.com/nerflow/nerflow/storage/fsstore"
)

// rot changes the content of the object under key and leaves its recorded
// digest as it was, as bit rot or a restore of other bytes under the old
// metadata would: nothing short of reading it shows the damage.
func rot(t *testing.T, c *cluster, key string) {
	t.Helper()
	ctx := context.Background()
	if fs, ok := c.store.(*fsstore.Store); ok {
		path, err := fs.Path(key)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		b[0] ^= 0x20
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	cfg := testenv.S3(t)
	mc, err := minio.New(cfg.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, "")})
	if err != nil {
		t.Fatal(err)
	}
	obj, err := mc.GetObject(ctx, c.bucket, "runs/"+key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(obj)
	if err != nil {
		t.Fatal(err)
	}
	info, err := obj.Stat()
	if err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x20
	meta := map[string]string{}
	for k, v := range info.UserMetadata {
		meta[k] = v
	}
	if _, err := mc.PutObject(ctx, c.bucket, "runs/"+key, bytes.NewReader(b), int64(len(b)), minio.PutObjectOptions{UserMetadata: meta}); err != nil {
		t.Fatal(err)
	}
	if st, err := c.store.Stat(ctx, key); err != nil || st.Digest == storage.Digest(b) {
		t.Fatalf("the rotten object's recorded digest changed: %+v, %v", st, err)
	}
}

// An artifact that is damaged after its node committed it is never used: a
// node record whose output is gone or replaced is a cache miss, and a node
// that reads bytes that rotted under their recorded digest fails that read,
// naming the artifact, and has the producer executed again before it runs.
func TestDamagedArtifactsAreMadeAgain(t *testing.T) {
	const text = `
nodes:
  a: {stage: test.emit, params: {text: A}}
  b: {stage: test.concat, inputs: {in: a}, params: {suffix: b}}
  c: {stage: test.concat, inputs: {in: a}, params: {suffix: c}}
`
	damages := []struct {
		name   string
		damage func(t *testing.T, c *cluster, a stages.Artifact)
	}{
		{"rotted", func(t *testing.T, c *cluster, a stages.Artifact) { rot(t, c, a.Key("out.txt")) }},
		{"vanished", func(t *testing.T, c *cluster, a stages.Artifact) {
			if err := c.store.Delete(context.Background(), a.Key("out.txt")); err != nil {
				t.Fatal(err)
			}
		}},
		{"replaced", func(t *testing.T, c *cluster, a stages.Artifact) {
			if _, err := storage.PutBytes(context.Background(), c.store, a.Key("out.txt"), []byte("Z")); err != nil {
				t.Fatal(err)
			}
		}},
	}
	forBoth(t, func(t *testing.T, c *cluster) {
		for i, d := range damages {
			t.Run(d.name, func(t *testing.T) {
				// Each case damages an output of its own.
				emitted := string(rune('A' + i))
				first := run(t, c, graph(t, text, "a.text="+emitted))
				if first.State != engine.Succeeded {
					t.Fatalf("run %s: %s", first.State, first.Error)
				}
				a1, _ := first.Node("a")
				d.damage(t, c, a1.Outputs["out"])
				if err := artifact.Verify(context.Background(), c.store, a1.Outputs["out"]); err == nil {
					t.Fatal("the damage is not damage")
				}

				began := time.Now()
				second := run(t, c, graph(t, text, "a.text="+emitted, "b.suffix=B", "c.suffix=C"))
				if second.State != engine.Succeeded {
					t.Fatalf("run %s: %s", second.State, second.Error)
				}
				t.Logf("%s: the run that met the damage succeeded %v after its submit", d.name, time.Since(began).Round(time.Millisecond))
				wantStates(t, second, map[string]string{"a": "done", "b": "done", "c": "done"})
				if got := output(t, c, second, "b", "out", "out.txt"); got != emitted+"B" {
					t.Errorf("b = %q, want %q", got, emitted+"B")
				}
				if got := output(t, c, second, "c", "out", "out.txt"); got != emitted+"C" {
					t.Errorf("c = %q, want %q", got, emitted+"C")
				}
				a2, _ := second.Node("a")
				if a2.Outputs["out"].Prefix == a1.Outputs["out"].Prefix || a2.Outputs["out"].Digest != a1.Outputs["out"].Digest {
					t.Errorf("a's output: %s (%s) after the damage, %s (%s) before; want a new copy of the same content",
						a2.Outputs["out"].Prefix, a2.Outputs["out"].Digest, a1.Outputs["out"].Prefix, a1.Outputs["out"].Digest)
				}
				// The cache now hands out the new copy.
				third := run(t, c, graph(t, text, "a.text="+emitted))
				wantStates(t, third, map[string]string{"a": "cached", "b": "cached", "c": "cached"})
				if a3, _ := third.Node("a"); a3.Outputs["out"].Prefix != a2.Outputs["out"].Prefix {
					t.Errorf("cached a: %s, want the new copy %s", a3.Outputs["out"].Prefix, a2.Outputs["out"].Prefix)
				}
			})
		}
	})
}

// A damaged dataset cannot be made again: the node that reads it fails at
// once, and the run's error names the artifact.
func TestDamagedDatasetFailsNamingIt(t *testing.T) {
	c := embedded(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	os.MkdirAll(data, 0o755)
	os.WriteFile(filepath.Join(data, "out.txt"), []byte("from disk"), 0o644)
	s, err := spec.Parse([]byte(`
nodes:
  copy: {stage: test.concat, inputs: {in: ./data}, params: {suffix: "."}}
`), "t.yaml", dir)
	if err != nil {
		t.Fatal(err)
	}
	g, err := s.Expand()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ds, err := c.submit.ImportDatasets(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	var a stages.Artifact
	for _, v := range ds {
		a = v
	}
	rot(t, c, a.Key("out.txt"))
	st := run(t, c, g)
	if st.State != engine.Failed || !strings.Contains(st.Error, "damaged artifact "+a.Digest+" at "+a.Prefix) {
		t.Fatalf("run %s: %s; want it failed, naming %s", st.State, st.Error, a.Prefix)
	}
	if n, _ := st.Node("copy"); n.Attempt != 0 {
		t.Errorf("copy failed after %d attempts; the damage is permanent", n.Attempt+1)
	}
}
