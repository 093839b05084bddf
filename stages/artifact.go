package stages

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/nerflow/nerflow/storage"
	"github.com/nerflow/nerflow/storage/artifact"
)

// Artifact is the manifest of one immutable output: a small set of named
// files stored under a common prefix of the store, each with its SHA-256
// digest, plus kind, metadata, producer and lineage. Its Digest identifies
// the content only, so two artifacts with the same files have the same
// digest wherever and however they were made, and downstream node keys
// (made of input digests) hit the cache for equal content. The model and
// its on-store format belong to package storage/artifact.
type Artifact = artifact.Manifest

// File is one file of an artifact.
type File = artifact.File

// Producer records where an artifact came from.
type Producer = artifact.Producer

// Input gives a stage read access to one input artifact.
type Input struct {
	Artifact
	ctx   context.Context
	store storage.Store
	// port and damage are set for a stage's inputs: reads that meet a
	// damaged file record it there for Exec.
	port   string
	damage *damageLog
}

// NewInput binds an artifact to the store it lives in, for code outside a
// stage (the CLI, tests) that reads artifacts.
func NewInput(ctx context.Context, st storage.Store, a Artifact) *Input {
	return &Input{Artifact: a, ctx: ctx, store: st}
}

// Open opens file name of the artifact. It fails when the stored object is
// gone or not the one the manifest lists, and the reader verifies the
// digest as it is read: both with a *DamagedInputError that names the
// artifact (wrapping storage.ErrNotFound or storage.ErrDigestMismatch).
func (in *Input) Open(name string) (io.ReadCloser, error) {
	if _, ok := in.File(name); !ok {
		// A name the manifest does not list is the reader's mistake, not
		// damage.
		return artifact.Open(in.ctx, in.store, in.Artifact, name)
	}
	rc, err := artifact.Open(in.ctx, in.store, in.Artifact, name)
	if err != nil {
		return nil, in.damaged(name, err)
	}
	return &checkedReader{ReadCloser: rc, in: in, name: name}, nil
}

// ReadFile reads file name whole, verified.
func (in *Input) ReadFile(name string) ([]byte, error) {
	rc, err := in.Open(name)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", in.Key(name), err)
	}
	return b, nil
}

// ReadJSON decodes file name into v.
func (in *Input) ReadJSON(name string, v any) error {
	b, err := in.ReadFile(name)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decoding %s: %w", in.Key(name), err)
	}
	return nil
}

// Fetch copies every file of the artifact into the local directory dir
// (created if needed), for libraries that want paths (checkpoint loaders).
func (in *Input) Fetch(dir string) error {
	for _, f := range in.Files {
		if err := in.FetchFile(f.Name, filepath.Join(dir, filepath.FromSlash(f.Name))); err != nil {
			return err
		}
	}
	return nil
}

// FetchFile copies file name of the artifact to dst, through a temporary
// file beside it: dst ends up the whole, verified file or is left as it was.
func (in *Input) FetchFile(name, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	rc, err := in.Open(name)
	if err != nil {
		return err
	}
	defer rc.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, rc); err != nil {
		tmp.Close()
		return fmt.Errorf("fetching %s: %w", in.Key(name), err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}

// Output is the writer of one output artifact. Files are streamed to the
// store as they are written; the engine commits the artifact's manifest
// after the stage returns.
type Output struct {
	ctx  context.Context
	port Port
	w    *artifact.Writer
}

// newOutput starts an output at prefix; files with the digests in share
// (the large files of the stage's inputs) are stored as shared blobs.
func newOutput(ctx context.Context, st storage.Store, port Port, prefix string, m Artifact, share []string) *Output {
	m.Kind = port.Kind
	w := artifact.NewWriter(st, prefix, m)
	w.Share(share...)
	return &Output{ctx: ctx, port: port, w: w}
}

// sharedDigests lists the digests of the inputs' files large enough to be
// stored once when an output carries them unchanged.
func sharedDigests(inputs map[string][]Artifact) []string {
	var out []string
	for _, arts := range inputs {
		for _, a := range arts {
			for _, f := range a.Files {
				if f.Size >= artifact.SharedMinSize {
					out = append(out, f.Digest)
				}
			}
		}
	}
	return out
}

// Name is the output's port name.
func (o *Output) Name() string { return o.port.Name }

// SetKind overrides the kind declared by the port.
func (o *Output) SetKind(kind string) { o.w.SetKind(kind) }

// SetSchemaVersion records the version of the layout of the output's files
// (part of the artifact's digest), so that readers can tell layouts apart.
func (o *Output) SetSchemaVersion(v int) { o.w.SetSchemaVersion(v) }

// SetMeta records a small string attribute in the manifest (part of the
// artifact's digest), e.g. the tagging scheme or a count.
func (o *Output) SetMeta(key, value string) { o.w.SetMeta(key, value) }

// WriteFile stores data as file name.
func (o *Output) WriteFile(name string, data []byte) error {
	_, err := o.w.PutBytes(o.ctx, name, data)
	return o.wrap(err)
}

// WriteJSON stores v, indented JSON, as file name.
func (o *Output) WriteJSON(name string, v any) error {
	_, err := o.w.PutJSON(o.ctx, name, v)
	return o.wrap(err)
}

// Create returns a writer that streams file name to the store; the file is
// published when Close returns nil. Always Close it.
func (o *Output) Create(name string) (io.WriteCloser, error) {
	wc, err := o.w.Create(o.ctx, name)
	return wc, o.wrap(err)
}

// AddFile copies the local file at path into the artifact as name. A large
// file with the bytes of a file of one of the stage's inputs is stored once
// (see artifact.Writer.PutFile): a checkpoint that carries its pretrained
// vectors or language model unchanged refers to the stored copy.
func (o *Output) AddFile(name, path string) error {
	_, err := o.w.PutFile(o.ctx, name, path)
	return o.wrap(err)
}

// AddSharedFile copies the local file at path into the artifact as name,
// stored as a shared blob when it is large whatever the inputs: for an
// output that later artifacts carry unchanged and that the stage makes
// again, byte for byte, when its inputs change (a word-vector table built
// from a fixed package), so that every version of it is one copy.
func (o *Output) AddSharedFile(name, path string) error {
	_, err := o.w.PutSharedFile(o.ctx, name, path)
	return o.wrap(err)
}

// AddDir copies every regular file under the local directory dir into the
// artifact, named by its slash-separated path relative to dir.
func (o *Output) AddDir(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		return o.AddFile(path.Clean(filepath.ToSlash(rel)), p)
	})
}

func (o *Output) wrap(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("output %s: %w", o.port.Name, err)
}

// commit writes the artifact's manifest, after every file, or only seals
// it when the caller records it (Env.RecordsManifests). Mistakes of the
// stage (no file, a file left open, an invalid kind) are permanent errors;
// a store that fails is worth a retry.
func (o *Output) commit(storeManifest bool) (Artifact, error) {
	finish := o.w.Finish
	if storeManifest {
		finish = o.w.Commit
	}
	a, err := finish(o.ctx)
	switch {
	case errors.Is(err, artifact.ErrInvalid) && o.w.Files() == 0:
		return Artifact{}, Permanent(errors.New("no file was written"))
	case errors.Is(err, artifact.ErrNotClosed), errors.Is(err, artifact.ErrInvalid):
		return Artifact{}, Permanent(err)
	}
	return a, err
}

// Import stores a local file or directory as an artifact: the external
// datasets a spec names by path. Files are stored under
// prefix/<digest of the content>/, and uploads are skipped when that prefix
// already holds them, so importing the same data twice costs one hash pass.
func Import(ctx context.Context, st storage.Store, prefix, localPath, kind string) (Artifact, error) {
	return artifact.Import(ctx, st, prefix, localPath, kind)
}
