// Package artifact groups stored files into artifacts described by a
// manifest, on top of any storage.Store.
//
// An artifact lives under a key prefix: its files are the objects
// "<prefix>/<name>" and its manifest is "<prefix>/manifest.json". The
// manifest is written last, after every file it lists has been stored and
// checked, so an artifact exists exactly when its manifest does; a producer
// that dies halfway leaves files without a manifest, which readers treat as
// no artifact at all (Read returns storage.ErrNotFound).
//
// The manifest records each file's size and digest. Open checks the stored
// object against it, so a file replaced after the manifest was written is
// an error (storage.ErrDigestMismatch), not a silent mix of two versions.
// The artifact's own digest is the digest of its manifest object: inputs are
// recorded in a manifest's lineage by that digest.
//
//	w := artifact.NewWriter(store, "nodes/ab12/out", artifact.Manifest{
//		Kind: "corpus", SchemaVersion: 1,
//		Producer: artifact.Producer{Stage: "distant-labels", Version: 2},
//	})
//	w.PutBytes(ctx, "train.jsonl", data)
//	a, err := w.Commit(ctx)
package artifact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/nerflow/nerflow/storage"
)

// ManifestName is the name of the manifest object under an artifact's
// prefix; no file of an artifact may use it.
const ManifestName = "manifest.json"

// FormatVersion is the version of the manifest format this package writes.
// Read refuses manifests of a later format rather than misread them.
const FormatVersion = 1

// Manifest describes an artifact.
type Manifest struct {
	// Format is the manifest format version (FormatVersion).
	Format int `json:"format"`
	// Kind names what the files hold: "corpus", "gazetteer",
	// "embeddings", "tagger-checkpoint"... (lower-case letters, digits,
	// '-').
	Kind string `json:"kind"`
	// SchemaVersion is the version of the kind's file layout, so readers
	// can refuse or convert older layouts.
	SchemaVersion int `json:"schema_version"`
	// Producer is what made the artifact.
	Producer Producer `json:"producer"`
	// Lineage lists the artifacts the producer read.
	Lineage []Input `json:"lineage,omitempty"`
	// Files are sorted by name.
	Files []File `json:"files"`
	// Created is when the manifest was written (UTC).
	Created time.Time `json:"created"`
	// Metadata is free-form: parameters, counts, notes.
	Metadata map[string]string `json:"metadata,omitempty"`
}

// Producer identifies the stage run that made an artifact.
type Producer struct {
	Stage   string `json:"stage"`
	Version int    `json:"version"`
	// Node is the node key of the pipeline node that ran the stage.
	Node string `json:"node,omitempty"`
	// Run is the id of the pipeline run.
	Run string `json:"run,omitempty"`
}

// Input is one artifact a producer read.
type Input struct {
	// Name is the role of the input, such as the stage's input port.
	Name string `json:"name"`
	// Digest is the input artifact's digest (Artifact.Digest).
	Digest string `json:"digest"`
}

// File is one file of an artifact.
type File struct {
	// Name is the file's key relative to the artifact's prefix.
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	Digest string `json:"digest"`
}

// Artifact is a manifest read from, or committed to, a store.
type Artifact struct {
	Prefix string
	// Digest is the digest of the manifest object; it identifies this
	// artifact in the lineage of others.
	Digest string
	Manifest
}

// Key returns the store key of file name.
func (a Artifact) Key(name string) string { return a.Prefix + "/" + name }

// ManifestKey returns the key of the manifest of the artifact at prefix.
func ManifestKey(prefix string) string { return prefix + "/" + ManifestName }

// File returns the entry for name.
func (m *Manifest) File(name string) (File, bool) {
	i, ok := slices.BinarySearchFunc(m.Files, name, func(f File, name string) int { return strings.Compare(f.Name, name) })
	if !ok {
		return File{}, false
	}
	return m.Files[i], true
}

var kindPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// Validate checks that m is a well-formed manifest of a format this package
// reads, with its files sorted by name.
func (m *Manifest) Validate() error {
	switch {
	case m.Format < 1:
		return fmt.Errorf("format %d: want a manifest format version of at least 1", m.Format)
	case m.Format > FormatVersion:
		return fmt.Errorf("format %d is newer than this program reads (%d)", m.Format, FormatVersion)
	case !kindPattern.MatchString(m.Kind):
		return fmt.Errorf("kind %q: want lower-case letters, digits and '-'", m.Kind)
	case m.SchemaVersion < 0:
		return fmt.Errorf("schema_version %d is negative", m.SchemaVersion)
	case m.Producer.Stage == "":
		return fmt.Errorf("producer: no stage")
	case m.Created.IsZero():
		return fmt.Errorf("no created time")
	}
	for i, in := range m.Lineage {
		if err := storage.ValidateDigest(in.Digest); err != nil {
			return fmt.Errorf("lineage[%d] (%s): %w", i, in.Name, err)
		}
	}
	for i, f := range m.Files {
		if err := validateFileName(f.Name); err != nil {
			return fmt.Errorf("files[%d]: %w", i, err)
		}
		if i > 0 && m.Files[i-1].Name >= f.Name {
			return fmt.Errorf("files[%d]: %q is not sorted after %q, or repeats it", i, f.Name, m.Files[i-1].Name)
		}
		if f.Size < 0 {
			return fmt.Errorf("files[%d] (%s): negative size %d", i, f.Name, f.Size)
		}
		if err := storage.ValidateDigest(f.Digest); err != nil {
			return fmt.Errorf("files[%d] (%s): %w", i, f.Name, err)
		}
	}
	return nil
}

func validateFileName(name string) error {
	if name == ManifestName {
		return fmt.Errorf("file name %q is reserved for the manifest", name)
	}
	if err := storage.ValidateKey(name); err != nil {
		return fmt.Errorf("file name: %w", err)
	}
	return nil
}

// Write publishes the manifest of the artifact whose files are already
// stored under prefix. It checks that each listed file is stored with the
// listed size and digest, sorts the files, sets Format, and sets Created to
// now when it is zero. The manifest is the last object written.
func Write(ctx context.Context, s storage.Store, prefix string, m Manifest) (Artifact, error) {
	m.Format = FormatVersion
	if m.Created.IsZero() {
		m.Created = time.Now().UTC()
	}
	m.Files = slices.Clone(m.Files)
	slices.SortFunc(m.Files, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	key := ManifestKey(prefix)
	if err := m.Validate(); err != nil {
		return Artifact{}, fmt.Errorf("artifact: writing %s: %w", key, err)
	}
	for _, f := range m.Files {
		info, err := s.Stat(ctx, prefix+"/"+f.Name)
		if err != nil {
			return Artifact{}, fmt.Errorf("artifact: writing %s: file %s: %w", key, f.Name, err)
		}
		if info.Size != f.Size || info.Digest != f.Digest {
			return Artifact{}, fmt.Errorf("artifact: writing %s: file %s is stored with size %d digest %s, the manifest says %d %s: %w",
				key, f.Name, info.Size, info.Digest, f.Size, f.Digest, storage.ErrDigestMismatch)
		}
	}
	info, err := storage.PutJSON(ctx, s, key, m)
	if err != nil {
		return Artifact{}, fmt.Errorf("artifact: writing %s: %w", key, err)
	}
	return Artifact{Prefix: prefix, Digest: info.Digest, Manifest: m}, nil
}

// Read reads and validates the manifest of the artifact at prefix. It
// returns an error wrapping storage.ErrNotFound when there is no manifest,
// that is, no artifact.
func Read(ctx context.Context, s storage.Store, prefix string) (Artifact, error) {
	key := ManifestKey(prefix)
	var m Manifest
	info, err := storage.GetJSON(ctx, s, key, &m)
	if err != nil {
		return Artifact{}, fmt.Errorf("artifact: %w", err)
	}
	if err := m.Validate(); err != nil {
		return Artifact{}, fmt.Errorf("artifact: %s: %w", key, err)
	}
	return Artifact{Prefix: prefix, Digest: info.Digest, Manifest: m}, nil
}

// Exists reports whether an artifact (its manifest) is stored at prefix.
func Exists(ctx context.Context, s storage.Store, prefix string) (bool, error) {
	_, err := s.Stat(ctx, ManifestKey(prefix))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, storage.ErrNotFound):
		return false, nil
	default:
		return false, fmt.Errorf("artifact: %w", err)
	}
}

// Open opens file name of a. It fails with storage.ErrDigestMismatch when
// the stored object is not the one the manifest lists, and the reader fails
// the same way if the bytes do not match their digest.
func Open(ctx context.Context, s storage.Store, a Artifact, name string) (io.ReadCloser, error) {
	f, ok := a.File(name)
	if !ok {
		return nil, fmt.Errorf("artifact: %s has no file %q: %w", a.Prefix, name, storage.ErrNotFound)
	}
	rc, info, err := s.Get(ctx, a.Key(name))
	if err != nil {
		return nil, fmt.Errorf("artifact: %w", err)
	}
	if info.Digest != f.Digest || info.Size != f.Size {
		rc.Close()
		return nil, fmt.Errorf("artifact: %s was replaced after its manifest was written (stored %s, listed %s): %w",
			a.Key(name), info.Digest, f.Digest, storage.ErrDigestMismatch)
	}
	return rc, nil
}

// ReadFile reads file name of a whole, verified.
func ReadFile(ctx context.Context, s storage.Store, a Artifact, name string) ([]byte, error) {
	rc, err := Open(ctx, s, a, name)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return nil, fmt.Errorf("artifact: %w", err)
	}
	return b, nil
}

// Verify reads every file of a and checks it against the manifest.
func Verify(ctx context.Context, s storage.Store, a Artifact) error {
	for _, f := range a.Files {
		rc, err := Open(ctx, s, a, f.Name)
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil {
			return fmt.Errorf("artifact: %w", err)
		}
	}
	return nil
}
