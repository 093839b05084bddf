// Package artifact is nerflow's one model of a stored artifact: a small set
// of named files under a key prefix of any storage.Store, described by a
// manifest. Pipeline stages (package stages) and the engine build on it.
//
// # Layout
//
// An artifact at prefix "p" has its files at "p/<name>" and its manifest at
// "p.manifest.json", beside the files rather than among them, so that no
// file name is reserved (an imported directory may well hold a
// manifest.json of its own). The manifest is written last, after every file
// it lists has been stored, so an artifact exists exactly when its manifest
// does: a producer that dies halfway leaves files without a manifest, which
// Read reports as storage.ErrNotFound. A producer whose caller keeps the
// manifest elsewhere (the pipeline engine keeps a node's outputs' manifests
// in its node record) ends the artifact with Writer.Finish, which stores
// no manifest; Stored then tells whether its files are still there.
//
// # Digest
//
// A manifest's Digest identifies the artifact's content: the SHA-256 of its
// kind, schema version, metadata and every file's name, size and digest.
// It leaves out where the files are stored, who made them, when, in which
// run and from which inputs, so equal outputs of different runs or attempts
// have equal digests. The pipeline engine builds node keys from input
// digests, which is what lets a node downstream of a re-executed one hit the
// cache when the re-execution produced the same bytes.
//
// # Reading
//
// Open and ReadFile check the stored object against the manifest: a file
// replaced after the manifest was written is an error wrapping
// storage.ErrDigestMismatch, not a silent mix of two versions, and the
// reader fails the same way if the bytes do not hash to their digest.
//
//	w := artifact.NewWriter(store, "artifacts/ab12/x1/labeled", artifact.Manifest{
//		Kind:     "corpus",
//		Producer: artifact.Producer{Stage: "distant.label", Version: 2, NodeKey: "ab12"},
//	})
//	w.PutBytes(ctx, "train.txt", data)
//	m, err := w.Commit(ctx) // m.Digest identifies the content
package artifact

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/nerflow/nerflow/storage"
	"github.com/nerflow/nerflow/storage/layout"
)

// FormatVersion is the version of the manifest format this package writes
// and the only one it reads. Format 1 was the first storage/artifact
// manifest, whose digest was that of the manifest object; format 2 merged it
// with the stages' artifacts and made the digest a content digest.
const FormatVersion = 2

// ManifestSuffix ends the key of an artifact's manifest: ManifestKey(p) is
// p + ManifestSuffix.
const ManifestSuffix = ".manifest.json"

// ErrInvalid is wrapped by the errors of Validate: a manifest that is not
// well-formed, of another format, or whose digest does not match its
// content.
var ErrInvalid = errors.New("invalid artifact manifest")

// Manifest describes an artifact. It is what "<prefix>.manifest.json"
// holds, and what the pipeline engine records as a node's outputs.
type Manifest struct {
	// Format is the manifest format version (FormatVersion).
	Format int `json:"format"`
	// Digest is the content digest (see the package documentation).
	Digest string `json:"digest"`
	// Kind names what the files hold: "corpus", "gazetteer", "embeddings",
	// "checkpoint"... (lower-case letters, digits and '-'); empty for
	// imported datasets, whose kind nobody declared.
	Kind string `json:"kind,omitempty"`
	// SchemaVersion is the version of the kind's file layout, so that
	// readers can refuse or convert older layouts; 0 when unversioned.
	SchemaVersion int `json:"schema_version,omitempty"`
	// Prefix is the store key prefix under which the files live.
	Prefix string `json:"prefix"`
	// Files are sorted by name; there is at least one.
	Files []File `json:"files"`
	// Meta holds small string attributes: counts, the tagging scheme,
	// scores. Part of the digest.
	Meta map[string]string `json:"meta,omitempty"`
	// Producer is what made the artifact.
	Producer Producer `json:"producer"`
	// Lineage lists the artifacts the producer read, by content digest.
	Lineage []Input `json:"lineage,omitempty"`
	// Created is when the manifest was written (UTC).
	Created time.Time `json:"created"`
}

// File is one file of an artifact.
type File struct {
	// Name is slash-separated and relative to the artifact's prefix.
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	Digest string `json:"digest"` // "sha256:<hex>"
	// Blob, when set, is where the bytes are: the shared file of that
	// digest (layout.Blob), which other artifacts with the same content
	// refer to as well, instead of a copy under the artifact's prefix.
	// Where a file is stored is no part of the artifact's content digest.
	Blob string `json:"blob,omitempty"`
}

// Shared tells whether the file's bytes are a shared blob, which deleting
// the artifact must leave to the store's collector (package gc).
func (f File) Shared() bool { return f.Blob != "" }

// Producer records where an artifact came from: a stage run, or, for an
// imported dataset, its Source.
type Producer struct {
	Stage   string `json:"stage,omitempty"`
	Version int    `json:"version,omitempty"`
	// NodeKey is the key of the pipeline node that ran the stage.
	NodeKey string `json:"node_key,omitempty"`
	// Run is the id of the pipeline run that executed the node.
	Run string `json:"run,omitempty"`
	// Source is set for imported datasets: the path or URL (credentials
	// redacted) they came from.
	Source string `json:"source,omitempty"`
}

// Input is one artifact a producer read.
type Input struct {
	// Name is the role of the input, such as the stage's input port.
	Name string `json:"name"`
	// Digest is the input's content digest (Manifest.Digest).
	Digest string `json:"digest"`
}

// ManifestKey returns the key of the manifest of the artifact at prefix.
func ManifestKey(prefix string) string { return prefix + ManifestSuffix }

// Key returns the store key of file name: its shared blob, or the key
// under the artifact's prefix.
func (m Manifest) Key(name string) string {
	if f, ok := m.File(name); ok && f.Blob != "" {
		return f.Blob
	}
	return m.Prefix + "/" + name
}

// File returns the entry for name.
func (m Manifest) File(name string) (File, bool) {
	i, ok := slices.BinarySearchFunc(m.Files, name, func(f File, name string) int { return strings.Compare(f.Name, name) })
	if !ok {
		return File{}, false
	}
	return m.Files[i], true
}

// Size is the total size of the files.
func (m Manifest) Size() int64 {
	var n int64
	for _, f := range m.Files {
		n += f.Size
	}
	return n
}

// ContentDigest computes the digest of m's content: kind, schema version,
// metadata and files (which must be sorted by name, as Seal leaves them).
func (m *Manifest) ContentDigest() string {
	// Empty and missing are one content: JSON drops an empty map (omitempty)
	// and turns an empty list into null or [] depending on how it was made.
	meta, files := m.Meta, m.Files
	if len(meta) == 0 {
		meta = nil
	}
	if len(files) == 0 {
		files = nil
	}
	if slices.ContainsFunc(files, File.Shared) {
		files = slices.Clone(files)
		for i := range files {
			files[i].Blob = ""
		}
	}
	content := struct {
		Kind          string            `json:"kind"`
		SchemaVersion int               `json:"schema_version"`
		Meta          map[string]string `json:"meta"`
		Files         []File            `json:"files"`
	}{m.Kind, m.SchemaVersion, meta, files}
	b, err := json.Marshal(content) // map keys come sorted
	if err != nil {
		panic(fmt.Sprintf("artifact: encoding content: %v", err)) // strings and ints only
	}
	return storage.Digest(b)
}

// Seal sorts the files by name and sets Format and Digest. Write seals the
// manifests it publishes; call Seal to learn the digest before that, for
// example to store the files under a prefix named after it.
func (m *Manifest) Seal() {
	m.Files = slices.Clone(m.Files)
	slices.SortFunc(m.Files, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	m.Format = FormatVersion
	m.Digest = m.ContentDigest()
}

var kindPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// Validate checks that m is a well-formed manifest of this format, with its
// files sorted by name and a digest that matches its content. Its errors
// wrap ErrInvalid.
func (m *Manifest) Validate() error {
	if err := m.validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

func (m *Manifest) validate() error {
	switch {
	case m.Format == 0:
		return errors.New("no format version: written by an older nerflow, or not a manifest")
	case m.Format != FormatVersion:
		return fmt.Errorf("format %d: this program reads format %d only", m.Format, FormatVersion)
	case m.Kind != "" && !kindPattern.MatchString(m.Kind):
		return fmt.Errorf("kind %q: want lower-case letters, digits and '-'", m.Kind)
	case m.SchemaVersion < 0:
		return fmt.Errorf("schema_version %d is negative", m.SchemaVersion)
	case m.Producer.Stage == "" && m.Producer.Source == "":
		return errors.New("producer: neither a stage nor a source")
	case m.Producer.Version < 0:
		return fmt.Errorf("producer: negative version %d", m.Producer.Version)
	case m.Created.IsZero():
		return errors.New("no created time")
	case len(m.Files) == 0:
		return errors.New("no files")
	}
	if err := storage.ValidateKey(m.Prefix); err != nil {
		return fmt.Errorf("prefix: %w", err)
	}
	for i, in := range m.Lineage {
		if err := storage.ValidateDigest(in.Digest); err != nil {
			return fmt.Errorf("lineage[%d] (%s): %w", i, in.Name, err)
		}
	}
	for i, f := range m.Files {
		if err := ValidateFileName(f.Name); err != nil {
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
		if f.Blob != "" && f.Blob != layout.Blob(f.Digest) {
			return fmt.Errorf("files[%d] (%s): blob %q is not the shared file of its digest (%s)", i, f.Name, f.Blob, layout.Blob(f.Digest))
		}
	}
	if err := storage.ValidateDigest(m.Digest); err != nil {
		return err
	}
	if want := m.ContentDigest(); m.Digest != want {
		return fmt.Errorf("digest %s does not match the content (%s): %w", m.Digest, want, storage.ErrDigestMismatch)
	}
	return nil
}

// ValidateFileName checks the name of an artifact's file: a store key
// (storage.ValidateKey) relative to the artifact's prefix.
func ValidateFileName(name string) error {
	if err := storage.ValidateKey(name); err != nil {
		return fmt.Errorf("file name: %w", err)
	}
	return nil
}

// Write publishes the manifest of the artifact whose files are already
// stored under prefix. It checks that each listed file is stored with the
// listed size and digest, seals m (see Seal) and sets Created to now when
// it is zero. The manifest is the last object written.
func Write(ctx context.Context, s storage.Store, prefix string, m Manifest) (Manifest, error) {
	for _, f := range m.Files {
		key := prefix + "/" + f.Name
		if f.Blob != "" {
			key = f.Blob
		}
		info, err := s.Stat(ctx, key)
		if err != nil {
			return Manifest{}, fmt.Errorf("artifact: writing %s: file %s: %w", ManifestKey(prefix), f.Name, err)
		}
		if info.Size != f.Size || info.Digest != f.Digest {
			return Manifest{}, fmt.Errorf("artifact: writing %s: file %s is stored with size %d digest %s, the manifest says %d %s: %w",
				ManifestKey(prefix), f.Name, info.Size, info.Digest, f.Size, f.Digest, storage.ErrDigestMismatch)
		}
	}
	return publish(ctx, s, prefix, m)
}

// publish seals, validates and stores m: Write without checking the files,
// for callers that have just stored them and hold their digests.
func publish(ctx context.Context, s storage.Store, prefix string, m Manifest) (Manifest, error) {
	m, err := seal(prefix, m)
	if err != nil {
		return Manifest{}, err
	}
	if err := put(ctx, s, m); err != nil {
		return Manifest{}, err
	}
	return m, nil
}

// seal returns m, describing the files under prefix, sealed and validated.
func seal(prefix string, m Manifest) (Manifest, error) {
	m.Prefix = prefix
	m.Meta, m.Lineage = maps.Clone(m.Meta), slices.Clone(m.Lineage) // the caller's to keep changing
	if m.Created.IsZero() {
		m.Created = time.Now().UTC()
	}
	m.Seal()
	if err := m.Validate(); err != nil {
		return Manifest{}, fmt.Errorf("artifact: writing %s: %w", ManifestKey(prefix), err)
	}
	return m, nil
}

// put stores the sealed manifest m beside its files.
func put(ctx context.Context, s storage.Store, m Manifest) error {
	key := ManifestKey(m.Prefix)
	if _, err := storage.PutJSON(ctx, s, key, m); err != nil {
		return fmt.Errorf("artifact: writing %s: %w", key, err)
	}
	return nil
}

// Read reads and validates the manifest of the artifact at prefix. It
// returns an error wrapping storage.ErrNotFound when there is no manifest,
// that is, no artifact, and one wrapping ErrInvalid for a manifest that
// fails Validate.
func Read(ctx context.Context, s storage.Store, prefix string) (Manifest, error) {
	key := ManifestKey(prefix)
	var m Manifest
	if _, err := storage.GetJSON(ctx, s, key, &m); err != nil {
		return Manifest{}, fmt.Errorf("artifact: %w", err)
	}
	if err := m.Validate(); err != nil {
		return Manifest{}, fmt.Errorf("artifact: %s: %w", key, err)
	}
	if m.Prefix != prefix {
		return Manifest{}, fmt.Errorf("artifact: %s: %w: it describes the files under %q", key, ErrInvalid, m.Prefix)
	}
	return m, nil
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

// Stored reports whether every file of m is stored as m lists it (size
// and digest), from the objects' metadata, without reading their content:
// whether the artifact is still in s, wherever its manifest is kept (a node
// output's manifest lives in the engine's node record only).
func Stored(ctx context.Context, s storage.Store, m Manifest) (bool, error) {
	for _, f := range m.Files {
		info, err := s.Stat(ctx, m.Key(f.Name))
		switch {
		case errors.Is(err, storage.ErrNotFound), errors.Is(err, storage.ErrDigestMismatch):
			return false, nil // gone, or its object damaged
		case err != nil:
			return false, fmt.Errorf("artifact: %w", err)
		case info.Size != f.Size || info.Digest != f.Digest:
			return false, nil
		}
	}
	return len(m.Files) > 0, nil
}

// Open opens file name of m. It fails with storage.ErrDigestMismatch when
// the stored object is not the one the manifest lists, and the reader fails
// the same way if the bytes do not match their digest.
func Open(ctx context.Context, s storage.Store, m Manifest, name string) (io.ReadCloser, error) {
	f, ok := m.File(name)
	if !ok {
		return nil, fmt.Errorf("artifact %s has no file %q (has: %s): %w", m.Prefix, name, m.fileNames(), storage.ErrNotFound)
	}
	rc, info, err := s.Get(ctx, m.Key(name))
	if err != nil {
		return nil, fmt.Errorf("artifact: opening %s: %w", m.Key(name), err)
	}
	if info.Digest != f.Digest || info.Size != f.Size {
		rc.Close()
		return nil, fmt.Errorf("artifact: %s was replaced after its manifest was written (stored %s, listed %s): %w",
			m.Key(name), info.Digest, f.Digest, storage.ErrDigestMismatch)
	}
	return rc, nil
}

// ReadFile reads file name of m whole, verified.
func ReadFile(ctx context.Context, s storage.Store, m Manifest, name string) ([]byte, error) {
	rc, err := Open(ctx, s, m, name)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return nil, fmt.Errorf("artifact: reading %s: %w", m.Key(name), err)
	}
	return b, nil
}

// Verify reads every file of m and checks it against the manifest.
func Verify(ctx context.Context, s storage.Store, m Manifest) error {
	for _, f := range m.Files {
		if err := VerifyFile(ctx, s, m, f.Name); err != nil {
			return err
		}
	}
	return nil
}

// VerifyFile reads file name of m whole and checks it against the
// manifest (storage.ErrNotFound or storage.ErrDigestMismatch when it is
// gone or damaged).
func VerifyFile(ctx context.Context, s storage.Store, m Manifest, name string) error {
	rc, err := Open(ctx, s, m, name)
	if err != nil {
		return err
	}
	defer rc.Close()
	if _, err := io.Copy(io.Discard, rc); err != nil {
		return fmt.Errorf("artifact: reading %s: %w", m.Key(name), err)
	}
	return nil
}

// Delete removes artifact m: its manifest first, so that
// readers never see a manifest whose files are gone, then its files. Shared
// files (File.Shared) stay: other artifacts may refer to them, and the
// store's collector deletes them once none does.
func Delete(ctx context.Context, s storage.Store, m Manifest) error {
	if err := s.Delete(ctx, ManifestKey(m.Prefix)); err != nil {
		return fmt.Errorf("artifact: deleting %s: %w", m.Prefix, err)
	}
	for _, f := range m.Files {
		if f.Shared() {
			continue
		}
		if err := s.Delete(ctx, m.Key(f.Name)); err != nil {
			return fmt.Errorf("artifact: deleting %s: %w", m.Key(f.Name), err)
		}
	}
	return nil
}

func (m Manifest) fileNames() string {
	names := make([]string, len(m.Files))
	for i, f := range m.Files {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}
