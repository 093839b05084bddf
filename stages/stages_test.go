package stages_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/storage"
	"github.com/nerflow/nerflow/storage/artifact"
	"github.com/nerflow/nerflow/storage/fsstore"
)

var demo = stages.Stage{
	Name: "demo.stage", Version: 1,
	Params: []stages.Param{
		stages.IntParam("epochs", 3, "epochs", stages.Range(1, 100)),
		stages.FloatParam("lr", 0.001, "learning rate", stages.AtLeast(0)),
		stages.StringParam("scheme", "io", "tags", stages.OneOf("io", "bio")),
		stages.BoolParam("drop_o", true, "drop O tokens"),
		stages.DurationParam("budget", time.Hour, "time budget"),
		stages.IntListParam("seeds", []int{1, 2}, "seeds", stages.AtLeast(0)),
		stages.FloatListParam("weights", nil, "weights"),
		stages.StringListParam("types", []string{"PER"}, "entity types", stages.OneOf("PER", "LOC", "ORG")),
		stages.StringParam("name", "", "required name", stages.Required()),
	},
	Run: func(*stages.Context) error { return nil },
}

func TestResolveParams(t *testing.T) {
	p, err := demo.ResolveParams(map[string]any{
		"epochs": 5, "lr": "0.01", "budget": "90m", "seeds": []any{3, "4"}, "weights": "0.5, 1.5",
		"types": []any{"LOC", "ORG"}, "name": "x", "drop_o": "false",
	})
	if err != nil {
		t.Fatal(err)
	}
	if p.Int("epochs") != 5 || p.Float("lr") != 0.01 || p.String("scheme") != "io" || p.Bool("drop_o") ||
		p.Duration("budget") != 90*time.Minute || !slices.Equal(p.Ints("seeds"), []int{3, 4}) ||
		!slices.Equal(p.Floats("weights"), []float64{0.5, 1.5}) || !slices.Equal(p.Strings("types"), []string{"LOC", "ORG"}) {
		t.Errorf("resolved %v", p.Map())
	}
	want := `{"budget":"1h30m0s","drop_o":false,"epochs":5,"lr":0.01,"name":"x","scheme":"io","seeds":[3,4],"types":["LOC","ORG"],"weights":[0.5,1.5]}`
	if got := string(p.Canonical()); got != want {
		t.Errorf("canonical\n got %s\nwant %s", got, want)
	}
	// Canonical JSON round-trips to the same parameters.
	q, err := demo.ParamsFromCanonical(p.Canonical())
	if err != nil {
		t.Fatal(err)
	}
	if string(q.Canonical()) != want {
		t.Errorf("round trip: %s", q.Canonical())
	}
	// 5 and 5.0 are the same integer, and the same key.
	r, err := demo.ResolveParams(map[string]any{"epochs": 5.0, "lr": 0.01, "budget": "1h30m", "seeds": []int{3, 4},
		"weights": []float64{0.5, 1.5}, "types": []string{"LOC", "ORG"}, "name": "x", "drop_o": false})
	if err != nil || string(r.Canonical()) != want {
		t.Errorf("equivalent params: %s, %v", r.Canonical(), err)
	}
	// A single value where a list goes is a list of one.
	one, err := demo.ResolveParams(map[string]any{"name": "x", "seeds": 7, "weights": 0.5, "types": "ORG"})
	if err != nil || !slices.Equal(one.Ints("seeds"), []int{7}) || !slices.Equal(one.Floats("weights"), []float64{0.5}) || !slices.Equal(one.Strings("types"), []string{"ORG"}) {
		t.Errorf("single values as lists: %v, %v", one.Map(), err)
	}
	// YAML's true and false, where a setting of auto, true or false goes,
	// read as the words.
	tri := stages.Stage{Name: "demo.tri", Version: 1, Params: []stages.Param{stages.StringParam("mode", "auto", "mode", stages.OneOf("auto", "true", "false"))}}
	for raw, want := range map[any]string{true: "true", false: "false", "auto": "auto"} {
		if p, err := tri.ResolveParams(map[string]any{"mode": raw}); err != nil || p.String("mode") != want {
			t.Errorf("mode %v: %v, %v", raw, p.Map(), err)
		}
	}
	if _, err := demo.ResolveParams(map[string]any{"name": "x", "seeds": 2.5}); err == nil || !strings.Contains(err.Error(), "element 0: want an integer") {
		t.Errorf("seeds: 2.5: %v", err)
	}
}

func TestParamErrors(t *testing.T) {
	base := map[string]any{"name": "x"}
	cases := []struct {
		param string
		value any
		want  string
	}{
		{"epochs", 0, "0 is below the minimum 1"},
		{"epochs", 2.5, "want an integer, got 2.5"},
		{"epochs", "many", `want an integer, got "many"`},
		{"lr", -1, "-1 is below the minimum 0"},
		{"scheme", "bioes", `"bioes" is not one of io, bio`},
		{"scheme", true, `"true" is not one of io, bio`},
		{"drop_o", "maybe", `want a bool, got "maybe"`},
		{"budget", "forever", "want a duration"},
		{"seeds", []any{1, -2}, "element 1: -2 is below the minimum 0"},
		{"types", []any{"PER", "MISC"}, `element 1: "MISC" is not one of PER, LOC, ORG`},
		{"nope", 1, "stage demo.stage has no such parameter"},
	}
	for _, c := range cases {
		raw := map[string]any{c.param: c.value}
		for k, v := range base {
			raw[k] = v
		}
		_, err := demo.ResolveParams(raw)
		var pe *stages.ParamError
		if !errors.As(err, &pe) || pe.Param != c.param || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s=%v: err = %v, want a ParamError on %s containing %q", c.param, c.value, err, c.param, c.want)
		}
	}
	if _, err := demo.ResolveParams(nil); err == nil || !strings.Contains(err.Error(), `param "name": required`) {
		t.Errorf("missing required param: %v", err)
	}
}

func TestGetterOfUndeclaredParamPanics(t *testing.T) {
	p, _ := demo.ResolveParams(map[string]any{"name": "x"})
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), `"lr" is float, read as int`) {
			t.Errorf("recovered %v", r)
		}
	}()
	p.Int("lr")
}

func TestValidateDeclaration(t *testing.T) {
	bad := []stages.Stage{
		{Name: "Bad", Version: 1, Run: demo.Run},
		{Name: "ok", Version: 0, Run: demo.Run},
		{Name: "ok", Version: 1},
		{Name: "ok", Version: 1, Run: demo.Run, Params: []stages.Param{stages.IntParam("n", 0, "", stages.Range(1, 2))}},
		{Name: "ok", Version: 1, Run: demo.Run, Outputs: []stages.Port{{Name: "o", Many: true}}},
		{Name: "ok", Version: 1, Run: demo.Run, Queue: "tpu"},
	}
	for i, s := range bad {
		if err := s.Validate(); err == nil {
			t.Errorf("declaration %d accepted", i)
		}
	}
	if err := demo.Validate(); err != nil {
		t.Error(err)
	}
}

func store(t *testing.T) *fsstore.Store {
	t.Helper()
	st, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

var upper = &stages.Stage{
	Name: "upper", Version: 1,
	Inputs:  []stages.Port{{Name: "text", Kind: "text"}},
	Outputs: []stages.Port{{Name: "loud", Kind: "text"}, {Name: "dir", Kind: "checkpoint"}},
	Run: func(c *stages.Context) error {
		b, err := c.Input("text").ReadFile("in.txt")
		if err != nil {
			return err
		}
		w, err := c.Output("loud").Create("out.txt")
		if err != nil {
			return err
		}
		if _, err := io.WriteString(w, strings.ToUpper(string(b))); err != nil {
			return err
		}
		if err := w.Close(); err != nil {
			return err
		}
		dir := filepath.Join(c.WorkDir(), "ckpt")
		os.MkdirAll(filepath.Join(dir, "sub"), 0o755)
		os.WriteFile(filepath.Join(dir, "a.bin"), []byte{1, 2, 3}, 0o644)
		os.WriteFile(filepath.Join(dir, "sub", "b.bin"), []byte{4}, 0o644)
		c.Progress(1, 1, "done")
		return c.Output("dir").AddDir(dir)
	},
}

func TestExec(t *testing.T) {
	ctx := context.Background()
	st := store(t)
	src := filepath.Join(t.TempDir(), "in.txt")
	os.WriteFile(src, []byte("hello"), 0o644)
	in, err := stages.Import(ctx, st, "datasets", src, "text")
	if err != nil {
		t.Fatal(err)
	}
	again, err := stages.Import(ctx, st, "datasets", src, "text")
	if err != nil || again.Digest != in.Digest || again.Prefix != in.Prefix {
		t.Fatalf("importing twice: %v, %+v vs %+v", err, again, in)
	}
	var reports []stages.ProgressUpdate
	outs, err := stages.Exec(ctx, upper, stages.Env{
		Store: st, Run: "r1", Node: "u", Key: "k1", Inputs: map[string][]stages.Artifact{"text": {in}}, OutputPrefix: "artifacts/k1/a",
		Progress: func(p stages.ProgressUpdate) { reports = append(reports, p) },
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := stages.NewInput(ctx, st, outs["loud"]).ReadFile("out.txt")
	if err != nil || string(b) != "HELLO" {
		t.Errorf("loud = %q, %v", b, err)
	}
	d := outs["dir"]
	if d.Kind != "checkpoint" || len(d.Files) != 2 || d.Files[0].Name != "a.bin" || d.Files[1].Name != "sub/b.bin" || d.Size() != 4 {
		t.Errorf("dir artifact = %+v", d)
	}
	if d.Producer != (stages.Producer{Stage: "upper", Version: 1, NodeKey: "k1", Run: "r1"}) {
		t.Errorf("producer = %+v", d.Producer)
	}
	if len(d.Lineage) != 1 || d.Lineage[0] != (artifact.Input{Name: "text", Digest: in.Digest}) {
		t.Errorf("lineage = %+v, want the input's digest", d.Lineage)
	}
	// Each output is a committed artifact: its manifest is in the store.
	if stored, err := artifact.Read(ctx, st, d.Prefix); err != nil || stored.Digest != d.Digest {
		t.Errorf("stored manifest of %s: %+v, %v", d.Prefix, stored, err)
	}
	fetched := t.TempDir()
	if err := stages.NewInput(ctx, st, d).Fetch(fetched); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(fetched, "sub", "b.bin")); len(b) != 1 || b[0] != 4 {
		t.Errorf("fetched sub/b.bin = %v", b)
	}
	if len(reports) != 1 || reports[0].Done != 1 {
		t.Errorf("progress reports = %v", reports)
	}
	if p := outs["loud"].Prefix; p != "artifacts/k1/a/loud" {
		t.Errorf("prefix of loud = %q, want OutputPrefix/loud", p)
	}
	// The same content under another prefix has the same digest; a
	// prefix per output replaces OutputPrefix/<output>.
	outs2, err := stages.Exec(ctx, upper, stages.Env{Store: st, Inputs: map[string][]stages.Artifact{"text": {in}}, OutputPrefix: "unused",
		OutputPrefixOf: func(name string) string { return "artifacts/k1-b-" + name }})
	if err != nil || outs2["loud"].Digest != outs["loud"].Digest || outs2["loud"].Prefix != "artifacts/k1-b-loud" {
		t.Errorf("second execution: %v, digests %s %s, prefix %q", err, outs2["loud"].Digest, outs["loud"].Digest, outs2["loud"].Prefix)
	}
	if stored, err := artifact.Read(ctx, st, outs2["dir"].Prefix); err != nil || stored.Digest != d.Digest {
		t.Errorf("stored manifest of %s: %+v, %v", outs2["dir"].Prefix, stored, err)
	}
	if b, err := stages.NewInput(ctx, st, outs2["loud"]).ReadFile("out.txt"); err != nil || string(b) != "HELLO" {
		t.Errorf("loud, second execution = %q, %v", b, err)
	}
}

func TestExecErrors(t *testing.T) {
	ctx := context.Background()
	st := store(t)
	forgets := &stages.Stage{Name: "forgets", Version: 1, Outputs: []stages.Port{{Name: "o"}},
		Run: func(*stages.Context) error { return nil }}
	_, err := stages.Exec(ctx, forgets, stages.Env{Store: st, OutputPrefix: "x"})
	if !stages.IsPermanent(err) || !strings.Contains(err.Error(), "output o: no file was written") {
		t.Errorf("missing output: %v", err)
	}
	panics := &stages.Stage{Name: "panics", Version: 1, Run: func(c *stages.Context) error { c.Input("nope"); return nil }}
	_, err = stages.Exec(ctx, panics, stages.Env{Store: st, OutputPrefix: "x"})
	if !stages.IsPermanent(err) || !strings.Contains(err.Error(), `reads undeclared input "nope"`) {
		t.Errorf("panic: %v", err)
	}
	leavesOpen := &stages.Stage{Name: "leaves-open", Version: 1, Outputs: []stages.Port{{Name: "o"}},
		Run: func(c *stages.Context) error {
			c.Output("o").WriteFile("done.txt", []byte("x"))
			_, err := c.Output("o").Create("pending.txt")
			return err
		}}
	_, err = stages.Exec(ctx, leavesOpen, stages.Env{Store: st, OutputPrefix: "y"})
	if !stages.IsPermanent(err) || !strings.Contains(err.Error(), "output o: artifact y/o: file pending.txt: created but not closed") {
		t.Errorf("file left open: %v", err)
	}
	badKind := &stages.Stage{Name: "bad-kind", Version: 1, Outputs: []stages.Port{{Name: "o"}},
		Run: func(c *stages.Context) error {
			c.Output("o").SetKind("Bad Kind")
			return c.Output("o").WriteFile("a", []byte("x"))
		}}
	_, err = stages.Exec(ctx, badKind, stages.Env{Store: st, OutputPrefix: "z"})
	if !stages.IsPermanent(err) || !strings.Contains(err.Error(), `kind "Bad Kind"`) {
		t.Errorf("invalid kind: %v", err)
	}
	fails := &stages.Stage{Name: "fails", Version: 1, Run: func(*stages.Context) error { return errors.New("disk full") }}
	_, err = stages.Exec(ctx, fails, stages.Env{Store: st, OutputPrefix: "x"})
	if err == nil || stages.IsPermanent(err) || err.Error() != "stage fails: disk full" {
		t.Errorf("transient failure: %v", err)
	}
	_, err = stages.Exec(ctx, upper, stages.Env{Store: st, OutputPrefix: "x"})
	if !stages.IsPermanent(err) || !strings.Contains(err.Error(), "input text is not connected") {
		t.Errorf("unconnected input: %v", err)
	}
}

// An input file replaced after its manifest was written is refused, not
// read as if it were the artifact the node key was computed from.
func TestInputVerifiesFiles(t *testing.T) {
	ctx := context.Background()
	st := store(t)
	src := filepath.Join(t.TempDir(), "in.txt")
	os.WriteFile(src, []byte("hello"), 0o644)
	in, err := stages.Import(ctx, st, "datasets", src, "text")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := storage.PutBytes(ctx, st, in.Key("in.txt"), []byte("HELLO")); err != nil {
		t.Fatal(err)
	}
	_, err = stages.Exec(ctx, upper, stages.Env{Store: st, Inputs: map[string][]stages.Artifact{"text": {in}}, OutputPrefix: "o"})
	if !errors.Is(err, storage.ErrDigestMismatch) {
		t.Errorf("stage reading a replaced input: %v, want ErrDigestMismatch", err)
	}
	if err := stages.NewInput(ctx, st, in).Fetch(t.TempDir()); !errors.Is(err, storage.ErrDigestMismatch) {
		t.Errorf("Fetch of a replaced file: %v, want ErrDigestMismatch", err)
	}
	if _, err := stages.NewInput(ctx, st, in).Open("other.txt"); !errors.Is(err, storage.ErrNotFound) || !strings.Contains(err.Error(), "has: in.txt") {
		t.Errorf("Open of a file the artifact lacks: %v", err)
	}
}

func TestCheckpoints(t *testing.T) {
	ctx := context.Background()
	st := store(t)
	var steps []int64
	counter := &stages.Stage{Name: "counter", Version: 1, Resumable: true, Outputs: []stages.Port{{Name: "n"}},
		Run: func(c *stages.Context) error {
			dir := filepath.Join(c.WorkDir(), "state")
			os.MkdirAll(dir, 0o755)
			step, ok, err := c.LoadCheckpoint(dir)
			if err != nil {
				return err
			}
			if ok {
				b, _ := os.ReadFile(filepath.Join(dir, "step"))
				if string(b) != strings.Repeat("x", int(step)) {
					return errors.New("checkpoint content does not match its step")
				}
			}
			steps = append(steps, step)
			for step < 5 {
				step++
				os.WriteFile(filepath.Join(dir, "step"), []byte(strings.Repeat("x", int(step))), 0o644)
				if err := c.SaveCheckpoint(dir, step); err != nil {
					return err
				}
				if step == 3 && c.Attempt == 0 {
					return errors.New("worker lost")
				}
			}
			return c.Output("n").WriteFile("n", []byte{byte(step)})
		}}
	env := stages.Env{Store: st, Key: "k", OutputPrefix: "out/1", CheckpointPrefix: "checkpoints/k"}
	if _, err := stages.Exec(ctx, counter, env); err == nil {
		t.Fatal("first attempt should fail")
	}
	env.Attempt, env.OutputPrefix = 1, "out/2"
	if _, err := stages.Exec(ctx, counter, env); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(steps, []int64{0, 3}) {
		t.Errorf("attempts started at steps %v, want [0 3]", steps)
	}
	objs, _ := st.List(ctx, "checkpoints/k/")
	if len(objs) != 3 { // latest.json, the file of the last checkpoint and its manifest
		t.Errorf("%d checkpoint objects kept, want 3 (older ones are deleted): %+v", len(objs), objs)
	}
	if err := stages.DropCheckpoints(ctx, st, "checkpoints/k"); err != nil {
		t.Fatal(err)
	}
	if objs, _ := st.List(ctx, "checkpoints/k/"); len(objs) != 0 {
		t.Errorf("%d objects after DropCheckpoints", len(objs))
	}
}

// TestListParamWithoutDefault: a list parameter declared without a default
// and left out of a spec resolves to the empty list, and survives the trip
// through the canonical form that workers decode.
func TestListParamWithoutDefault(t *testing.T) {
	st := stages.Stage{Name: "lists", Version: 1, Params: []stages.Param{
		stages.StringListParam("types", nil, "types"),
		stages.FloatListParam("weights", nil, "weights"),
		stages.IntListParam("priorities", nil, "priorities"),
	}}
	p, err := st.ResolveParams(nil)
	if err != nil {
		t.Fatal(err)
	}
	back, err := st.ParamsFromCanonical(p.Canonical())
	if err != nil {
		t.Fatalf("decoding %s: %v", p.Canonical(), err)
	}
	if len(back.Strings("types")) != 0 || len(back.Floats("weights")) != 0 || len(back.Ints("priorities")) != 0 {
		t.Errorf("want empty lists, got %s", back.Canonical())
	}
}

// A stage that passes one of its inputs on unchanged makes an artifact of
// the input's digest, files, kind, schema version and metadata: what reads
// it shares its cache key with what reads the input. A large file is not
// stored a second time: the copy holds it as a shared blob.
func TestContextPassOn(t *testing.T) {
	ctx := context.Background()
	st := store(t)
	// The input: a stage's output with metadata and a schema version,
	// files in a folder and a large file among them.
	large := bytes.Repeat([]byte("x"), artifact.SharedMinSize)
	made, err := stages.Exec(ctx, &stages.Stage{
		Name: "make", Version: 1,
		Outputs: []stages.Port{{Name: "out", Kind: "corpus"}},
		Run: func(c *stages.Context) error {
			o := c.Output("out")
			o.SetMeta("labels", "given")
			o.SetSchemaVersion(3)
			if err := o.WriteFile("a.conll", []byte("Paris B-LOC\n")); err != nil {
				return err
			}
			if err := o.WriteFile("large.bin", large); err != nil {
				return err
			}
			return o.WriteFile("sub/b.txt", []byte("x"))
		},
	}, stages.Env{Store: st, OutputPrefix: "m"})
	if err != nil {
		t.Fatal(err)
	}
	in := made["out"]
	passed, err := stages.Exec(ctx, &stages.Stage{
		Name: "pass", Version: 1,
		Inputs:  []stages.Port{{Name: "in", Kind: "corpus"}},
		Outputs: []stages.Port{{Name: "out", Kind: "corpus"}},
		Run: func(c *stages.Context) error {
			_, err := c.PassOn("out", c.Input("in"))
			return err
		},
	}, stages.Env{Store: st, Inputs: map[string][]stages.Artifact{"in": {in}}, OutputPrefix: "p", TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	out := passed["out"]
	if out.Digest != in.Digest || out.Prefix == in.Prefix || out.SchemaVersion != 3 || out.Meta["labels"] != "given" || len(out.Files) != 3 {
		t.Errorf("copy %+v of %+v: want the same content under its own prefix", out, in)
	}
	if b, err := stages.NewInput(ctx, st, out).ReadFile("sub/b.txt"); err != nil || string(b) != "x" {
		t.Errorf("copy's sub/b.txt = %q, %v", b, err)
	}
	if f, ok := out.File("large.bin"); !ok || !f.Shared() {
		t.Errorf("copy's large.bin %+v: want it stored once, as a shared blob", f)
	}
}
