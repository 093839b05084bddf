package artifact

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/nerflow/nerflow/storage"
)

// Writer stores the files of one artifact and then commits its manifest.
// Its methods may be called from several goroutines.
type Writer struct {
	store  storage.Store
	prefix string

	mu        sync.Mutex
	manifest  Manifest
	names     map[string]bool
	committed bool
}

// NewWriter starts an artifact at prefix described by m (kind, producer,
// lineage, metadata); the files come from the Writer's Put methods.
func NewWriter(s storage.Store, prefix string, m Manifest) *Writer {
	m.Files = nil
	return &Writer{store: s, prefix: prefix, manifest: m, names: map[string]bool{}}
}

// Put stores r as file name of the artifact.
func (w *Writer) Put(ctx context.Context, name string, r io.Reader, opts ...storage.PutOption) (storage.ObjectInfo, error) {
	if err := w.claim(name); err != nil {
		return storage.ObjectInfo{}, err
	}
	info, err := w.store.Put(ctx, w.prefix+"/"+name, r, opts...)
	if err != nil {
		w.release(name)
		return storage.ObjectInfo{}, fmt.Errorf("artifact: %w", err)
	}
	w.mu.Lock()
	w.manifest.Files = append(w.manifest.Files, File{Name: name, Size: info.Size, Digest: info.Digest})
	w.mu.Unlock()
	return info, nil
}

// PutBytes stores b as file name of the artifact.
func (w *Writer) PutBytes(ctx context.Context, name string, b []byte, opts ...storage.PutOption) (storage.ObjectInfo, error) {
	return w.Put(ctx, name, bytes.NewReader(b), opts...)
}

// PutJSON stores v as indented JSON as file name of the artifact.
func (w *Writer) PutJSON(ctx context.Context, name string, v any, opts ...storage.PutOption) (storage.ObjectInfo, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return storage.ObjectInfo{}, fmt.Errorf("artifact: encoding %s: %w", name, err)
	}
	opts = append([]storage.PutOption{storage.WithContentType("application/json")}, opts...)
	return w.PutBytes(ctx, name, append(b, '\n'), opts...)
}

// claim reserves name, so that two Puts of one name are caught instead of
// racing to a manifest that lists the loser's digest.
func (w *Writer) claim(name string) error {
	if err := validateFileName(name); err != nil {
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

func (w *Writer) release(name string) {
	w.mu.Lock()
	delete(w.names, name)
	w.mu.Unlock()
}

// Commit writes the manifest, publishing the artifact. Files whose Put
// failed are not part of it. A failed Commit may be retried.
func (w *Writer) Commit(ctx context.Context) (Artifact, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.committed {
		return Artifact{}, fmt.Errorf("artifact %s: committed twice", w.prefix)
	}
	a, err := Write(ctx, w.store, w.prefix, w.manifest)
	if err != nil {
		return Artifact{}, err
	}
	w.committed = true
	return a, nil
}
