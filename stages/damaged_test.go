package stages_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/storage"
	"github.com/nerflow/nerflow/storage/fsstore"
)

// flipFirstByte changes the first content byte of key's file in a file
// store, leaving its recorded digest as it was: bit rot.
func flipFirstByte(t *testing.T, st *fsstore.Store, key string) {
	t.Helper()
	path, err := st.Path(key)
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
}

// A read of an input whose bytes rotted, or whose file vanished, fails with
// an error that names the artifact, and the execution fails with it however
// the stage handled the read's error: nothing made from a damaged input is
// published.
func TestDamagedInput(t *testing.T) {
	ctx := context.Background()
	type handling struct {
		name string
		run  func(c *stages.Context) error
	}
	read := func(c *stages.Context) ([]byte, error) { return c.Input("text").ReadFile("in.txt") }
	write := func(c *stages.Context) error { return c.Output("o").WriteFile("o.txt", []byte("made")) }
	handlings := []handling{
		{"returns it", func(c *stages.Context) error {
			if _, err := read(c); err != nil {
				return err
			}
			return write(c)
		}},
		{"wraps it with %v, permanent", func(c *stages.Context) error {
			if _, err := read(c); err != nil {
				return stages.Permanent(fmt.Errorf("loading text: %v", err))
			}
			return write(c)
		}},
		{"ignores it", func(c *stages.Context) error {
			_, _ = read(c)
			return write(c)
		}},
	}
	damages := map[string]func(t *testing.T, st *fsstore.Store, in stages.Artifact) error{
		"bit rot": func(t *testing.T, st *fsstore.Store, in stages.Artifact) error {
			flipFirstByte(t, st, in.Key("in.txt"))
			return storage.ErrDigestMismatch
		},
		"vanished": func(t *testing.T, st *fsstore.Store, in stages.Artifact) error {
			if err := st.Delete(ctx, in.Key("in.txt")); err != nil {
				t.Fatal(err)
			}
			return storage.ErrNotFound
		},
	}
	for dname, damage := range damages {
		for _, h := range handlings {
			t.Run(dname+"/"+h.name, func(t *testing.T) {
				st := store(t)
				src := filepath.Join(t.TempDir(), "in.txt")
				os.WriteFile(src, []byte("hello"), 0o644)
				in, err := stages.Import(ctx, st, "datasets", src, "text")
				if err != nil {
					t.Fatal(err)
				}
				want := damage(t, st, in)
				s := &stages.Stage{Name: "reader", Version: 1,
					Inputs:  []stages.Port{{Name: "text", Kind: "text"}},
					Outputs: []stages.Port{{Name: "o"}}, Run: h.run}
				outs, err := stages.Exec(ctx, s, stages.Env{Store: st, Inputs: map[string][]stages.Artifact{"text": {in}}, OutputPrefix: "o"})
				var d *stages.DamagedInputError
				if !errors.As(err, &d) || !errors.Is(err, want) || outs != nil {
					t.Fatalf("Exec = %v, %v; want a DamagedInputError wrapping %v", outs, err, want)
				}
				if d.Input != "text" || d.Artifact.Digest != in.Digest || d.File != "in.txt" {
					t.Errorf("damage reported as %+v", d)
				}
				if msg := err.Error(); !strings.Contains(msg, "input text: damaged artifact "+in.Digest+" at "+in.Prefix) || !strings.Contains(msg, "file in.txt") {
					t.Errorf("error does not name the artifact: %s", msg)
				}
				if objs, _ := st.List(ctx, "o/"); len(objs) != 0 {
					// The output's file may be stored, but no manifest makes
					// it an artifact.
					for _, o := range objs {
						if strings.HasSuffix(o.Key, ".manifest.json") {
							t.Errorf("an output was published: %s", o.Key)
						}
					}
				}
			})
		}
	}
	// Outside a stage, a read names the artifact too.
	st := store(t)
	src := filepath.Join(t.TempDir(), "in.txt")
	os.WriteFile(src, []byte("hello"), 0o644)
	in, _ := stages.Import(ctx, st, "datasets", src, "text")
	flipFirstByte(t, st, in.Key("in.txt"))
	_, err := stages.NewInput(ctx, st, in).ReadFile("in.txt")
	var d *stages.DamagedInputError
	if !errors.As(err, &d) || !errors.Is(err, storage.ErrDigestMismatch) || !strings.Contains(err.Error(), in.Prefix) {
		t.Errorf("ReadFile of a rotten file: %v", err)
	}
}
