package artifact

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sync"

	"github.com/nerflow/nerflow/storage"
	"github.com/nerflow/nerflow/storage/layout"
)

// ErrNotClosed is wrapped by the error of a Commit that found a file from
// Create not closed yet.
var ErrNotClosed = errors.New("created but not closed")

// Writer stores the files of one artifact and then commits its manifest.
// Its methods may be called from several goroutines.
type Writer struct {
	store  storage.Store
	prefix string

	mu        sync.Mutex
	manifest  Manifest
	names     map[string]bool
	open      map[string]*fileWriter // from Create, not closed yet
	share     map[string]bool        // digests PutFile stores as shared blobs
	committed bool
}

// NewWriter starts an artifact at prefix described by m (kind, schema
// version, producer, lineage, metadata); the files come from the Writer's
// Put and Create methods.
func NewWriter(s storage.Store, prefix string, m Manifest) *Writer {
	m.Files = nil
	m.Meta = maps.Clone(m.Meta)
	return &Writer{store: s, prefix: prefix, manifest: m, names: map[string]bool{}, open: map[string]*fileWriter{}}
}

// Prefix is where the artifact's files go.
func (w *Writer) Prefix() string { return w.prefix }

// SetKind sets the manifest's kind.
func (w *Writer) SetKind(kind string) {
	w.mu.Lock()
	w.manifest.Kind = kind
	w.mu.Unlock()
}

// SetSchemaVersion sets the version of the kind's file layout.
func (w *Writer) SetSchemaVersion(v int) {
	w.mu.Lock()
	w.manifest.SchemaVersion = v
	w.mu.Unlock()
}

// SetMeta records a metadata attribute (part of the digest).
func (w *Writer) SetMeta(key, value string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.manifest.Meta == nil {
		w.manifest.Meta = map[string]string{}
	}
	w.manifest.Meta[key] = value
}

// Files returns how many files have been stored so far.
func (w *Writer) Files() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.manifest.Files)
}

// Put stores r as file name of the artifact.
func (w *Writer) Put(ctx context.Context, name string, r io.Reader, opts ...storage.PutOption) (storage.ObjectInfo, error) {
	if err := w.claim(name); err != nil {
		return storage.ObjectInfo{}, err
	}
	return w.put(ctx, name, r, opts...)
}

// PutBytes stores b as file name of the artifact.
func (w *Writer) PutBytes(ctx context.Context, name string, b []byte, opts ...storage.PutOption) (storage.ObjectInfo, error) {
	return w.Put(ctx, name, bytes.NewReader(b), opts...)
}

// PutJSON stores v as indented JSON as file name of the artifact.
func (w *Writer) PutJSON(ctx context.Context, name string, v any, opts ...storage.PutOption) (storage.ObjectInfo, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return storage.ObjectInfo{}, fmt.Errorf("artifact %s: encoding %s: %w", w.prefix, name, err)
	}
	opts = append([]storage.PutOption{storage.WithContentType("application/json")}, opts...)
	return w.PutBytes(ctx, name, append(b, '\n'), opts...)
}

// SharedMinSize is the size from which PutFile stores a file that Share
// declared as a shared blob rather than under the artifact's prefix.
const SharedMinSize = 1 << 20

// Share declares content digests that files of the artifact may carry
// unchanged from elsewhere (the files of the producer's inputs): PutFile
// stores a file of one of these digests, of SharedMinSize bytes or more,
// as a shared blob.
func (w *Writer) Share(digests ...string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.share == nil {
		w.share = map[string]bool{}
	}
	for _, d := range digests {
		w.share[d] = true
	}
}

// PutFile stores the local file at path as file name of the artifact. A
// file that carries shared content (see Share) is stored once for every
// artifact that holds the same bytes: as the blob of its digest
// (layout.Blob), which the manifest's File.Blob names. That is how a
// checkpoint carrying the word vectors it was trained with, unchanged, or
// the language model it embeds, costs the store no second copy of them,
// while what is new in it (its weights) stays under its prefix and goes
// with it.
//
// The blob is written even when it is already stored (the same bytes,
// published atomically): its modification time then tells the store's
// collector, which spares what was written lately, that an artifact has
// just taken it up.
func (w *Writer) PutFile(ctx context.Context, name, path string, opts ...storage.PutOption) (storage.ObjectInfo, error) {
	return w.putFile(ctx, name, path, false, opts...)
}

// PutSharedFile is PutFile for a file that is stored as a shared blob
// whatever Share declared, when it has SharedMinSize bytes or more: for a
// producer whose large output later artifacts carry unchanged and which
// makes the same bytes again when it runs again (embeddings.vectors: the
// table of a fixed vectors package), so that every copy of it is one.
func (w *Writer) PutSharedFile(ctx context.Context, name, path string, opts ...storage.PutOption) (storage.ObjectInfo, error) {
	return w.putFile(ctx, name, path, true, opts...)
}

func (w *Writer) putFile(ctx context.Context, name, path string, always bool, opts ...storage.PutOption) (storage.ObjectInfo, error) {
	if err := w.claim(name); err != nil {
		return storage.ObjectInfo{}, err
	}
	f, err := os.Open(path)
	if err != nil {
		w.unclaim(name)
		return storage.ObjectInfo{}, fmt.Errorf("artifact %s: %w", w.prefix, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		w.unclaim(name)
		return storage.ObjectInfo{}, fmt.Errorf("artifact %s: %w", w.prefix, err)
	}
	w.mu.Lock()
	sharing := always || len(w.share) > 0
	w.mu.Unlock()
	if fi.Size() < SharedMinSize || !sharing {
		return w.put(ctx, name, f, opts...)
	}
	h := storage.NewHasher()
	if _, err := io.Copy(h, storage.ContextReader(ctx, f)); err != nil {
		w.unclaim(name)
		return storage.ObjectInfo{}, fmt.Errorf("artifact %s: hashing %s: %w", w.prefix, name, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		w.unclaim(name)
		return storage.ObjectInfo{}, fmt.Errorf("artifact %s: %w", w.prefix, err)
	}
	w.mu.Lock()
	shared := always || w.share[h.Digest()]
	w.mu.Unlock()
	if !shared {
		return w.put(ctx, name, f, append(opts, storage.WithDigest(h.Digest()))...)
	}
	blob := layout.Blob(h.Digest())
	// The digest guards against the file changing between the two reads.
	info, err := w.store.Put(ctx, blob, f, append(opts, storage.WithDigest(h.Digest()))...)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		delete(w.names, name)
		return storage.ObjectInfo{}, fmt.Errorf("artifact %s: writing %s (shared as %s): %w", w.prefix, name, blob, err)
	}
	w.manifest.Files = append(w.manifest.Files, File{Name: name, Size: info.Size, Digest: info.Digest, Blob: blob})
	return info, nil
}

func (w *Writer) unclaim(name string) {
	w.mu.Lock()
	delete(w.names, name)
	w.mu.Unlock()
}

// Create returns a writer that streams file name to the store; the file is
// part of the artifact once Close returns nil. Always Close it: Commit
// fails while a created file is open.
func (w *Writer) Create(ctx context.Context, name string, opts ...storage.PutOption) (io.WriteCloser, error) {
	if err := w.claim(name); err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	fw := &fileWriter{pw: pw, done: make(chan error, 1)}
	w.mu.Lock()
	w.open[name] = fw
	w.mu.Unlock()
	go func() {
		_, err := w.put(ctx, name, pr, opts...)
		pr.CloseWithError(err) // unblocks a Write if the store gave up early
		w.mu.Lock()
		delete(w.open, name)
		w.mu.Unlock()
		fw.done <- err
	}()
	return fw, nil
}

type fileWriter struct {
	pw     *io.PipeWriter
	done   chan error
	closed bool
	err    error
}

func (f *fileWriter) Write(p []byte) (int, error) { return f.pw.Write(p) }

func (f *fileWriter) Close() error {
	if f.closed {
		return f.err
	}
	f.closed = true
	f.pw.Close()
	f.err = <-f.done
	return f.err
}

// put stores the claimed file name.
func (w *Writer) put(ctx context.Context, name string, r io.Reader, opts ...storage.PutOption) (storage.ObjectInfo, error) {
	info, err := w.store.Put(ctx, w.prefix+"/"+name, r, opts...)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		delete(w.names, name)
		return storage.ObjectInfo{}, fmt.Errorf("artifact %s: writing %s: %w", w.prefix, name, err)
	}
	w.manifest.Files = append(w.manifest.Files, File{Name: name, Size: info.Size, Digest: info.Digest})
	return info, nil
}

// claim reserves name, so that two Puts of one name are caught instead of
// racing to a manifest that lists the loser's digest.
func (w *Writer) claim(name string) error {
	if err := ValidateFileName(name); err != nil {
		return fmt.Errorf("artifact %s: %w", w.prefix, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.committed:
		return fmt.Errorf("artifact %s: file %s written after Commit", w.prefix, name)
	case w.names[name]:
		return fmt.Errorf("artifact %s: file %s written twice", w.prefix, name)
	}
	w.names[name] = true
	return nil
}

// Commit writes the manifest, publishing the artifact, and returns it
// sealed. Files whose Put failed are not part of it. A Commit that finds
// files from Create still open aborts them (their writers fail) and fails
// with ErrNotClosed. A failed Commit may be retried.
func (w *Writer) Commit(ctx context.Context) (Manifest, error) {
	return w.finish(ctx, true)
}

// Finish ends the artifact as Commit does and returns its sealed,
// validated manifest, but stores no manifest: for a caller that keeps the
// manifest itself and is the only way to the files, as the pipeline
// engine's node record is for a node's outputs. Storing it beside the
// files too would write each manifest twice.
func (w *Writer) Finish(ctx context.Context) (Manifest, error) {
	return w.finish(ctx, false)
}

func (w *Writer) finish(ctx context.Context, store bool) (Manifest, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.committed {
		return Manifest{}, fmt.Errorf("artifact %s: committed twice", w.prefix)
	}
	if len(w.open) > 0 {
		names := slices.Sorted(maps.Keys(w.open))
		for _, f := range w.open {
			f.pw.CloseWithError(ErrNotClosed) // ends the store's Put, which stores nothing
		}
		return Manifest{}, fmt.Errorf("artifact %s: file %s: %w", w.prefix, names[0], ErrNotClosed)
	}
	// The files' sizes and digests are those their Puts returned: checking
	// them again, as Write does, would cost a round trip per file.
	m, err := seal(w.prefix, w.manifest)
	if err == nil && store {
		err = put(ctx, w.store, m)
	}
	if err != nil {
		return Manifest{}, err
	}
	w.committed = true
	return m, nil
}
