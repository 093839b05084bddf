package stages

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nerflow/nerflow/storage"
	"github.com/nerflow/nerflow/storage/artifact"
)

// Context is what a stage's Run receives. It is a context.Context (cancelled
// when the run is cancelled or the worker shuts down) carrying everything the
// stage may use.
type Context struct {
	context.Context
	// Node is the node's id in the spec, e.g. "train[seed=3]".
	Node string
	// Key is the node key: the cache identity of this execution.
	Key string
	// Params are the resolved, validated parameters.
	Params Params
	// Device is the compute device the stage may use: "cpu" or "cuda:N".
	Device string
	// Attempt counts from 0; it is > 0 when a previous attempt failed or its
	// worker died.
	Attempt int
	// Log is the stage's logger, tagged with run, node and stage.
	Log *slog.Logger

	stage   *Stage
	env     Env
	inputs  map[string][]*Input
	outputs map[string]*Output
	// The work directory is made on the first WorkDir call: most stages
	// never use one, and a directory made and removed per node is two
	// metadata writes to the disk for nothing.
	workOnce sync.Once
	workDir  string
	workErr  error
	progress func(ProgressUpdate)
	// damage collects the damaged inputs the stage's reads met.
	damage damageLog
}

// ProgressUpdate is one progress report of a running stage.
type ProgressUpdate struct {
	Done  int64  `json:"done"`
	Total int64  `json:"total"` // 0 when unknown
	Note  string `json:"note,omitempty"`
}

// Input returns the single artifact connected to input name, or nil when an
// Optional input is not connected. It panics if the stage did not declare
// the input (a bug in the stage).
func (c *Context) Input(name string) *Input {
	c.mustInput(name)
	ins := c.inputs[name]
	if len(ins) == 0 {
		return nil
	}
	return ins[0]
}

// Inputs returns every artifact connected to input name, in the order the
// spec lists them (fan-in: one per fanned-out node, in fan-out order).
func (c *Context) Inputs(name string) []*Input {
	c.mustInput(name)
	return c.inputs[name]
}

func (c *Context) mustInput(name string) {
	if _, ok := c.stage.Input(name); !ok {
		panic(fmt.Sprintf("stages: stage %s reads undeclared input %q", c.stage.Name, name))
	}
}

// Output returns the writer of output name. It panics if the stage did not
// declare the output.
func (c *Context) Output(name string) *Output {
	o, ok := c.outputs[name]
	if !ok {
		panic(fmt.Sprintf("stages: stage %s writes undeclared output %q", c.stage.Name, name))
	}
	return o
}

// PassOn makes output name the content of input in again: its schema
// version, metadata and files, fetched into the work directory and added
// back as AddDir adds them (a large file is stored once, as a shared
// blob). The output keeps the kind its port declares. Where the input is
// of that kind (another stage's output of the port's kind), the output has
// the input's digest, so what reads it shares its node keys, hence its
// cache, with what reads the input: a stage that keeps one of its inputs (a
// choice on dev) costs its readers no second run. Metadata set on the
// returned output afterwards (a name for what was chosen) is part of its
// content, and the digest then differs.
func (c *Context) PassOn(name string, in *Input) (*Output, error) {
	dir, err := os.MkdirTemp(c.WorkDir(), "pass-")
	if err != nil {
		return nil, err
	}
	if err := in.Fetch(dir); err != nil {
		return nil, err
	}
	out := c.Output(name)
	out.SetSchemaVersion(in.SchemaVersion)
	for k, v := range in.Meta {
		out.SetMeta(k, v)
	}
	return out, out.AddDir(dir)
}

// Progress reports how far the stage is, e.g. (batch, batches, "epoch 3").
// Reports are cheap: the engine throttles what it forwards. Total is 0 when
// unknown.
func (c *Context) Progress(done, total int64, note string) {
	if c.progress != nil {
		c.progress(ProgressUpdate{Done: done, Total: total, Note: note})
	}
}

// WorkDir is a private local scratch directory, removed when Run returns.
// It is made on the first call; if that fails, the path returned does not
// exist, and the stage's error is reported with the reason.
func (c *Context) WorkDir() string {
	c.workOnce.Do(func() {
		c.workDir, c.workErr = os.MkdirTemp(c.env.TempDir, "nerflow-stage-")
		if c.workErr != nil {
			c.workDir = filepath.Join(c.env.TempDir, "nerflow-stage-unavailable")
		}
	})
	return c.workDir
}

// checkpointRecord is what "<checkpoint prefix>/latest.json" holds.
type checkpointRecord struct {
	Step     int64     `json:"step"`
	Files    Artifact  `json:"files"`
	Attempt  int       `json:"attempt"`
	SavedAt  time.Time `json:"saved_at"`
	Previous string    `json:"-"`
}

// SaveCheckpoint stores the files of the local directory dir as the node's
// latest checkpoint, at step (epochs, batches: the stage's own unit). A
// checkpoint is published atomically: a worker that dies halfway through
// saving leaves the previous checkpoint in place. Checkpoints live under the
// node key, so only an attempt of the very same node (same stage version,
// params and inputs) ever resumes from them.
func (c *Context) SaveCheckpoint(dir string, step int64) error {
	if c.env.CheckpointPrefix == "" {
		return errors.New("stages: checkpoints are not available to this execution")
	}
	prev, _, err := c.latestCheckpoint()
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	prefix := fmt.Sprintf("%s/%d-%s", c.env.CheckpointPrefix, step, randomID())
	out := newOutput(c, c.env.Store, Port{Name: "checkpoint", Kind: "checkpoint"}, prefix, c.describe(), sharedDigests(c.env.Inputs))
	if err := out.AddDir(dir); err != nil {
		return fmt.Errorf("saving checkpoint: %w", err)
	}
	art, err := out.commit(true)
	if err != nil {
		return fmt.Errorf("saving checkpoint of %s: %w", dir, err)
	}
	rec := checkpointRecord{Step: step, Files: art, Attempt: c.Attempt, SavedAt: time.Now().UTC()}
	b, _ := json.Marshal(rec)
	if _, err := c.env.Store.Put(c, c.env.CheckpointPrefix+"/latest.json", strings.NewReader(string(b))); err != nil {
		return fmt.Errorf("publishing checkpoint: %w", err)
	}
	if prev != nil {
		// The old checkpoint is unreachable now; deleting it is best effort.
		_ = artifact.Delete(c, c.env.Store, prev.Files)
	}
	c.Log.Debug("checkpoint saved", "step", step, "files", len(art.Files), "bytes", art.Size())
	return nil
}

// LoadCheckpoint restores the node's latest checkpoint into the local
// directory dir. ok is false (and dir untouched) when there is none, which is
// the normal case for a first attempt.
func (c *Context) LoadCheckpoint(dir string) (step int64, ok bool, err error) {
	if c.env.CheckpointPrefix == "" {
		return 0, false, nil
	}
	rec, _, err := c.latestCheckpoint()
	if errors.Is(err, storage.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	if err := rec.Files.Validate(); err != nil {
		// Written by another version of nerflow, or damaged: starting over
		// costs time, failing every attempt would cost the node.
		c.Log.Warn("ignoring checkpoint", "step", rec.Step, "err", err)
		return 0, false, nil
	}
	in := NewInput(c, c.env.Store, rec.Files)
	if err := in.Fetch(dir); err != nil {
		return 0, false, fmt.Errorf("loading checkpoint at step %d: %w", rec.Step, err)
	}
	c.Log.Info("resuming from checkpoint", "step", rec.Step, "saved_by_attempt", rec.Attempt)
	return rec.Step, true, nil
}

func (c *Context) latestCheckpoint() (*checkpointRecord, storage.ObjectInfo, error) {
	rc, info, err := c.env.Store.Get(c, c.env.CheckpointPrefix+"/latest.json")
	if err != nil {
		return nil, info, err
	}
	defer rc.Close()
	var rec checkpointRecord
	if err := json.NewDecoder(rc).Decode(&rec); err != nil {
		return nil, info, fmt.Errorf("reading checkpoint record: %w", err)
	}
	return &rec, info, nil
}

// DropCheckpoints deletes every checkpoint stored under prefix; the engine
// calls it once a node's outputs are committed.
func DropCheckpoints(ctx context.Context, st storage.Store, prefix string) error {
	objs, err := st.List(ctx, prefix+"/")
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := st.Delete(ctx, o.Key); err != nil {
			return err
		}
	}
	return nil
}

// describe returns what the manifests of the execution's outputs start
// from: producer and lineage, the input digests in port order.
func (c *Context) describe() Artifact {
	a := Artifact{Producer: Producer{Stage: c.stage.Name, Version: c.stage.Version, NodeKey: c.Key, Run: c.env.Run}}
	for _, p := range c.stage.Inputs {
		for _, in := range c.inputs[p.Name] {
			a.Lineage = append(a.Lineage, artifact.Input{Name: p.Name, Digest: in.Digest})
		}
	}
	return a
}

func randomID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// NewAttemptID returns a short random id, used to give every attempt its own
// output prefix so that two attempts of a node never write the same keys.
func NewAttemptID() string { return randomID() }

type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent marks err as not worth retrying (bad input, invalid data): the
// node fails at once instead of using up its retries.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// Failed is what a stage returns when its own work (a training, say) ends
// in err: a permanent failure, since a retry with the same inputs and
// params fails the same way; unless the execution was cancelled (a worker
// shutting down, a run cancelled), whose error must reach the engine as it
// is, so that the node is handed back or cancelled instead of failed.
func (c *Context) Failed(err error) error {
	if err == nil || c.Err() != nil {
		return err
	}
	return Permanent(err)
}

// IsPermanent reports whether err was marked with Permanent.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}

// Env is everything the engine (or a test) provides to execute a stage once.
type Env struct {
	Store storage.Store
	// Run is the id of the pipeline run, recorded in the outputs' producer.
	Run  string
	Node string
	Key  string
	// Params must come from the stage's ResolveParams.
	Params Params
	// Inputs maps each connected input port to its artifacts.
	Inputs map[string][]Artifact
	// OutputPrefix is where this attempt writes its outputs; output name is
	// written under OutputPrefix/name/. It must be unique to the attempt.
	OutputPrefix string
	// OutputPrefixOf, when set, gives each output its own prefix instead:
	// output name is written under OutputPrefixOf(name)/, unique to the
	// attempt too. The engine puts attempt and output in one key segment
	// (layout.AttemptOutputs), a directory fewer per node in a filesystem
	// store.
	OutputPrefixOf func(name string) string
	// RecordsManifests says that the caller stores the manifests Exec
	// returns where it finds the outputs again (the engine: in the node
	// record), so Exec stores none beside the files. Otherwise output name's
	// manifest is OutputPrefix/name.manifest.json (or beside the prefix
	// OutputPrefixOf gives).
	RecordsManifests bool
	// CheckpointPrefix is where checkpoints of the node live; empty disables
	// them.
	CheckpointPrefix string
	Device           string
	Attempt          int
	Log              *slog.Logger
	Progress         func(ProgressUpdate)
	// TempDir is the parent of the stage's work directory (os.TempDir when
	// empty).
	TempDir string
}

// Exec runs stage s once in env and returns its committed output artifacts
// (each file stored, then its manifest unless env.RecordsManifests). It
// checks the inputs against the declaration, turns a panic of the stage into
// a permanent error, and fails when a declared output was not written.
func Exec(ctx context.Context, s *Stage, env Env) (outs map[string]Artifact, err error) {
	if env.Store == nil {
		return nil, errors.New("stages: Exec without a store")
	}
	if env.Log == nil {
		env.Log = slog.New(slog.DiscardHandler)
	}
	if env.Params.values == nil {
		if env.Params, err = s.ResolveParams(nil); err != nil {
			return nil, Permanent(fmt.Errorf("stage %s: %w", s.Name, err))
		}
	}
	c := &Context{
		Context: ctx, Node: env.Node, Key: env.Key, Params: env.Params, Device: env.Device,
		Attempt: env.Attempt, Log: env.Log, stage: s, env: env, progress: env.Progress,
		inputs: map[string][]*Input{}, outputs: map[string]*Output{},
	}
	if c.Device == "" {
		c.Device = "cpu"
	}
	for name := range env.Inputs {
		if _, ok := s.Input(name); !ok {
			return nil, Permanent(fmt.Errorf("stage %s has no input %q", s.Name, name))
		}
	}
	for _, p := range s.Inputs {
		arts := env.Inputs[p.Name]
		switch {
		case len(arts) == 0 && !p.Optional:
			return nil, Permanent(fmt.Errorf("stage %s: input %s is not connected", s.Name, p.Name))
		case len(arts) > 1 && !p.Many:
			return nil, Permanent(fmt.Errorf("stage %s: input %s takes one artifact, got %d", s.Name, p.Name, len(arts)))
		}
		for _, a := range arts {
			in := NewInput(ctx, env.Store, a)
			in.port, in.damage = p.Name, &c.damage
			c.inputs[p.Name] = append(c.inputs[p.Name], in)
		}
	}
	for _, p := range s.Outputs {
		prefix := env.OutputPrefix + "/" + p.Name
		if env.OutputPrefixOf != nil {
			prefix = env.OutputPrefixOf(p.Name)
		}
		c.outputs[p.Name] = newOutput(ctx, env.Store, p, prefix, c.describe(), sharedDigests(env.Inputs))
	}
	defer func() {
		c.workOnce.Do(func() {}) // no directory to remove if none was made
		if c.workDir != "" && c.workErr == nil {
			os.RemoveAll(c.workDir)
		}
	}()

	err = run(c, s)
	if d := c.damage.first(); d != nil {
		// Whatever the stage made of it (an error wrapped without %w, or
		// nothing), an execution that read a damaged input publishes
		// nothing, and the caller learns which artifact it was.
		var seen *DamagedInputError
		switch {
		case err == nil:
			err = fmt.Errorf("stage %s: %w", s.Name, d)
		case !errors.As(err, &seen):
			err = fmt.Errorf("%w (%w)", err, d)
		}
		return nil, err
	}
	if err != nil {
		if c.workErr != nil {
			return nil, fmt.Errorf("stage %s: work dir: %v; %w", s.Name, c.workErr, err)
		}
		if errors.Is(err, syscall.ENOSPC) && !errors.Is(err, storage.ErrNoSpace) && c.workDir != "" {
			// The stage's own files, in its scratch space (the store's
			// writes say so already).
			return nil, storage.NoSpace("the scratch space "+filepath.Dir(c.workDir), "the stage's files", err)
		}
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("stage %s: %w", s.Name, err)
	}
	outs = make(map[string]Artifact, len(s.Outputs))
	names := make([]string, 0, len(s.Outputs))
	for _, p := range s.Outputs {
		names = append(names, p.Name)
	}
	sort.Strings(names)
	for _, name := range names {
		a, err := c.outputs[name].commit(!env.RecordsManifests)
		if err != nil {
			return nil, fmt.Errorf("stage %s: output %s: %w", s.Name, name, err) // keeps Permanent visible
		}
		outs[name] = a
	}
	return outs, nil
}

func run(c *Context, s *Stage) (err error) {
	defer func() {
		if r := recover(); r != nil {
			c.Log.Error("stage panicked", "panic", r, "stack", string(debug.Stack()))
			err = Permanent(fmt.Errorf("stage %s panicked: %v", s.Name, r))
		}
	}()
	if err := s.Run(c); err != nil {
		return fmt.Errorf("stage %s: %w", s.Name, err) // keeps Permanent visible to errors.As
	}
	return nil
}
