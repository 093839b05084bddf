package artifact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/nerflow/nerflow/storage"
)

// Import stores a local file or directory as an artifact of kind: the
// external datasets a pipeline spec names by path. The artifact's prefix is
// "<prefix>/<hex of its digest>", so importing the same data again finds it
// there and uploads nothing (it still costs one hash pass); the manifest is
// rewritten, naming this import's source.
func Import(ctx context.Context, s storage.Store, prefix, localPath, kind string) (Manifest, error) {
	fail := func(err error) (Manifest, error) { return Manifest{}, fmt.Errorf("importing %s: %w", localPath, err) }
	paths, err := localFiles(localPath)
	if err != nil {
		return fail(err)
	}
	m := Manifest{Kind: kind, Producer: Producer{Source: localPath}}
	for name, p := range paths {
		h := storage.NewHasher()
		if err := copyFile(h, p); err != nil {
			return fail(err)
		}
		m.Files = append(m.Files, File{Name: name, Size: h.Size(), Digest: h.Digest()})
	}
	m.Seal()
	dst := prefix + "/" + strings.TrimPrefix(m.Digest, "sha256:")
	for _, f := range m.Files {
		key := dst + "/" + f.Name
		if info, err := s.Stat(ctx, key); err == nil && info.Digest == f.Digest {
			continue
		}
		if err := upload(ctx, s, key, paths[f.Name], f.Digest); err != nil {
			return fail(err)
		}
	}
	// Every file was just checked or stored with its digest.
	m, err = publish(ctx, s, dst, m)
	if err != nil {
		return fail(err)
	}
	return m, nil
}

// localFiles maps the artifact's file names to the local paths of the
// regular files at p: p itself, named by its base name, or every file under
// directory p, named by its slash-separated path relative to p.
func localFiles(p string) (map[string]string, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return map[string]string{filepath.Base(p): p}, nil
	}
	files := map[string]string{}
	err = filepath.WalkDir(p, func(file string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(p, file)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = file
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("directory holds no files")
	}
	return files, nil
}

func copyFile(w io.Writer, p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}

// upload stores the local file p under key, refusing content that no longer
// has the digest it was hashed to.
func upload(ctx context.Context, s storage.Store, key, p, digest string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = s.Put(ctx, key, f, storage.WithDigest(digest))
	switch {
	case errors.Is(err, storage.ErrDigestMismatch):
		return fmt.Errorf("%s changed while being imported: %w", p, err)
	case err != nil:
		return fmt.Errorf("storing %s: %w", p, err)
	}
	return nil
}
