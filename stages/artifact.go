package stages

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/nerflow/nerflow/storage"
)

// Artifact is the manifest of one immutable output: a small set of named
// files (one file for a corpus, several for a checkpoint directory) stored
// under a common prefix of the store, each with its SHA-256 digest.
type Artifact struct {
	// Digest identifies the content: the SHA-256 of the kind, the metadata
	// and every file's name and digest. Two artifacts with the same files
	// have the same digest wherever they are stored, so downstream node keys
	// (made of input digests) hit the cache for equal content.
	Digest string `json:"digest"`
	Kind   string `json:"kind,omitempty"`
	// Prefix is the store key prefix under which the files live.
	Prefix string            `json:"prefix"`
	Files  []File            `json:"files"`
	Meta   map[string]string `json:"meta,omitempty"`
	// Producer is the lineage: which stage and node key made the artifact.
	Producer Producer `json:"producer"`
}

// File is one file of an artifact.
type File struct {
	Name   string `json:"name"` // slash-separated, relative to the prefix
	Size   int64  `json:"size"`
	Digest string `json:"digest"` // "sha256:<hex>"
}

// Producer records where an artifact came from.
type Producer struct {
	Stage   string `json:"stage,omitempty"`
	Version int    `json:"version,omitempty"`
	NodeKey string `json:"node_key,omitempty"`
	// Source is set for external datasets: the path or URL they came from.
	Source string `json:"source,omitempty"`
}

// Key returns the store key of file name.
func (a Artifact) Key(name string) string { return a.Prefix + "/" + name }

// File returns the entry for name.
func (a Artifact) File(name string) (File, bool) {
	i := sort.Search(len(a.Files), func(i int) bool { return a.Files[i].Name >= name })
	if i < len(a.Files) && a.Files[i].Name == name {
		return a.Files[i], true
	}
	return File{}, false
}

// Size is the total size of the files.
func (a Artifact) Size() int64 {
	var n int64
	for _, f := range a.Files {
		n += f.Size
	}
	return n
}

// Seal sorts the files and computes Digest from the content fields.
func (a *Artifact) Seal() {
	sort.Slice(a.Files, func(i, j int) bool { return a.Files[i].Name < a.Files[j].Name })
	content := struct {
		Kind  string            `json:"kind"`
		Files []File            `json:"files"`
		Meta  map[string]string `json:"meta"`
	}{a.Kind, a.Files, a.Meta}
	b, _ := json.Marshal(content)
	sum := sha256.Sum256(b)
	a.Digest = "sha256:" + hex.EncodeToString(sum[:])
}

// ValidateFileName checks an artifact file name: a relative slash-separated
// path without empty, "." or ".." elements.
func ValidateFileName(name string) error {
	if name == "" || strings.HasPrefix(name, "/") || strings.Contains(name, "\\") {
		return fmt.Errorf("invalid artifact file name %q", name)
	}
	for _, el := range strings.Split(name, "/") {
		if el == "" || el == "." || el == ".." {
			return fmt.Errorf("invalid artifact file name %q", name)
		}
	}
	return nil
}

// Input gives a stage read access to one input artifact.
type Input struct {
	Artifact
	ctx   context.Context
	store storage.Store
}

// NewInput binds an artifact to the store it lives in, for code outside a
// stage (the CLI, tests) that reads artifacts.
func NewInput(ctx context.Context, st storage.Store, a Artifact) *Input {
	return &Input{Artifact: a, ctx: ctx, store: st}
}

// Open opens file name of the artifact. The reader verifies the digest as it
// is read.
func (in *Input) Open(name string) (io.ReadCloser, error) {
	if _, ok := in.File(name); !ok {
		return nil, fmt.Errorf("artifact %s has no file %q (has: %s)", shortDigest(in.Digest), name, in.fileNames())
	}
	rc, _, err := in.store.Get(in.ctx, in.Key(name))
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", in.Key(name), err)
	}
	return rc, nil
}

// ReadFile reads file name whole.
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
		if err := in.fetchFile(f.Name, filepath.Join(dir, filepath.FromSlash(f.Name))); err != nil {
			return err
		}
	}
	return nil
}

func (in *Input) fetchFile(name, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	rc, err := in.Open(name)
	if err != nil {
		return err
	}
	defer rc.Close()
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, rc); err != nil {
		f.Close()
		return fmt.Errorf("fetching %s: %w", in.Key(name), err)
	}
	return f.Close()
}

func (in *Input) fileNames() string {
	names := make([]string, len(in.Files))
	for i, f := range in.Files {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}

func shortDigest(d string) string {
	d = strings.TrimPrefix(d, "sha256:")
	if len(d) > 12 {
		return d[:12]
	}
	return d
}

// Output is the writer of one output artifact. Files are streamed to the
// store as they are written; the artifact's manifest is sealed by the engine
// after the stage returns.
type Output struct {
	ctx   context.Context
	store storage.Store
	port  Port

	mu      sync.Mutex
	art     Artifact
	names   map[string]bool
	writing map[string]bool // files from Create not closed yet
}

func newOutput(ctx context.Context, st storage.Store, port Port, prefix string, prod Producer) *Output {
	return &Output{ctx: ctx, store: st, port: port, names: map[string]bool{}, writing: map[string]bool{},
		art: Artifact{Kind: port.Kind, Prefix: prefix, Producer: prod}}
}

// Name is the output's port name.
func (o *Output) Name() string { return o.port.Name }

// SetKind overrides the kind declared by the port.
func (o *Output) SetKind(kind string) { o.mu.Lock(); o.art.Kind = kind; o.mu.Unlock() }

// SetMeta records a small string attribute in the manifest (part of the
// artifact's digest), e.g. the schema version of a file format.
func (o *Output) SetMeta(key, value string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.art.Meta == nil {
		o.art.Meta = map[string]string{}
	}
	o.art.Meta[key] = value
}

func (o *Output) claim(name string) error {
	if err := ValidateFileName(name); err != nil {
		return fmt.Errorf("output %s: %w", o.port.Name, err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.names[name] {
		return fmt.Errorf("output %s: file %q written twice", o.port.Name, name)
	}
	o.names[name] = true
	return nil
}

func (o *Output) put(name string, r io.Reader) error {
	key := o.art.Prefix + "/" + name
	info, err := o.store.Put(o.ctx, key, r)
	if err != nil {
		return fmt.Errorf("output %s: writing %s: %w", o.port.Name, name, err)
	}
	o.mu.Lock()
	o.art.Files = append(o.art.Files, File{Name: name, Size: info.Size, Digest: info.Digest})
	o.mu.Unlock()
	return nil
}

// WriteFile stores data as file name.
func (o *Output) WriteFile(name string, data []byte) error {
	if err := o.claim(name); err != nil {
		return err
	}
	return o.put(name, bytes.NewReader(data))
}

// WriteJSON stores v, indented JSON, as file name.
func (o *Output) WriteJSON(name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("output %s: encoding %s: %w", o.port.Name, name, err)
	}
	return o.WriteFile(name, append(b, '\n'))
}

// Create returns a writer that streams file name to the store; the file is
// published when Close returns nil. Always Close it.
func (o *Output) Create(name string) (io.WriteCloser, error) {
	if err := o.claim(name); err != nil {
		return nil, err
	}
	o.mu.Lock()
	o.writing[name] = true
	o.mu.Unlock()
	pr, pw := io.Pipe()
	w := &streamWriter{pw: pw, done: make(chan error, 1)}
	go func() {
		err := o.put(name, pr)
		pr.CloseWithError(err) // unblocks a writer if Put gave up early
		o.mu.Lock()
		delete(o.writing, name)
		o.mu.Unlock()
		w.done <- err
	}()
	return w, nil
}

type streamWriter struct {
	pw     *io.PipeWriter
	done   chan error
	closed bool
	err    error
}

func (w *streamWriter) Write(p []byte) (int, error) { return w.pw.Write(p) }

func (w *streamWriter) Close() error {
	if w.closed {
		return w.err
	}
	w.closed = true
	w.pw.Close()
	w.err = <-w.done
	return w.err
}

// AddFile copies the local file at path into the artifact as name.
func (o *Output) AddFile(name, path string) error {
	if err := o.claim(name); err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("output %s: %w", o.port.Name, err)
	}
	defer f.Close()
	return o.put(name, f)
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

// seal returns the finished manifest; it fails if nothing was written.
func (o *Output) seal() (Artifact, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for name := range o.writing {
		return Artifact{}, fmt.Errorf("file %q was created but not closed", name)
	}
	if len(o.art.Files) == 0 {
		return Artifact{}, errors.New("no file was written")
	}
	a := o.art
	a.Files = append([]File(nil), o.art.Files...)
	a.Seal()
	return a, nil
}

// Import stores a local file or directory as an artifact: the external
// datasets a spec names by path. Files are stored under
// prefix/<digest of the content>/, and uploads are skipped when that prefix
// already holds them, so importing the same data twice costs one hash pass.
func Import(ctx context.Context, st storage.Store, prefix, localPath, kind string) (Artifact, error) {
	fi, err := os.Stat(localPath)
	if err != nil {
		return Artifact{}, fmt.Errorf("importing %s: %w", localPath, err)
	}
	type local struct{ name, path string }
	var files []local
	if fi.IsDir() {
		err = filepath.WalkDir(localPath, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			rel, err := filepath.Rel(localPath, p)
			if err != nil {
				return err
			}
			files = append(files, local{filepath.ToSlash(rel), p})
			return nil
		})
		if err != nil {
			return Artifact{}, fmt.Errorf("importing %s: %w", localPath, err)
		}
		if len(files) == 0 {
			return Artifact{}, fmt.Errorf("importing %s: directory holds no files", localPath)
		}
	} else {
		files = []local{{filepath.Base(localPath), localPath}}
	}
	// Seal sorts by name; sort first so that files[i] matches a.Files[i].
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	a := Artifact{Kind: kind, Producer: Producer{Source: localPath}}
	for _, f := range files {
		d, n, err := hashFile(f.path)
		if err != nil {
			return Artifact{}, fmt.Errorf("importing %s: %w", f.path, err)
		}
		a.Files = append(a.Files, File{Name: f.name, Size: n, Digest: d})
	}
	a.Seal()
	a.Prefix = prefix + "/" + strings.TrimPrefix(a.Digest, "sha256:")
	for i, f := range files {
		want := a.Files[i]
		if info, err := st.Stat(ctx, a.Key(want.Name)); err == nil && info.Digest == want.Digest {
			continue
		}
		r, err := os.Open(f.path)
		if err != nil {
			return Artifact{}, fmt.Errorf("importing %s: %w", f.path, err)
		}
		info, err := st.Put(ctx, a.Key(want.Name), r)
		r.Close()
		if err != nil {
			return Artifact{}, fmt.Errorf("importing %s: %w", f.path, err)
		}
		if info.Digest != want.Digest {
			return Artifact{}, fmt.Errorf("importing %s: file changed while being imported", f.path)
		}
	}
	return a, nil
}

func hashFile(p string) (string, int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), n, nil
}
