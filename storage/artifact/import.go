package artifact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/nerflow/nerflow/storage"
)

// ImportSource stores the data that src names as an artifact under
// "<prefix>/<hex of its digest>": src is a local path, a file:// URL, or
// the URL of another store (s3://bucket/key?endpoint=...) naming an object
// or a prefix that holds several, which are copied. It is how a pipeline's
// external datasets enter the store. Importing the same data again uploads
// nothing; the manifest, written last, names src (without credentials) as
// its source.
func ImportSource(ctx context.Context, s storage.Store, prefix, src, kind string) (Manifest, error) {
	if !strings.Contains(src, "://") {
		return Import(ctx, s, prefix, src, kind)
	}
	u, err := url.Parse(src)
	if err != nil {
		return Manifest{}, fmt.Errorf("importing %s: %w", storage.Redact(src), err)
	}
	if u.Scheme == "file" {
		return Import(ctx, s, prefix, strings.TrimPrefix(src, "file://"), kind)
	}
	m, err := importFromStore(ctx, s, prefix, u, kind)
	if err != nil {
		return Manifest{}, fmt.Errorf("importing %s: %w", storage.Redact(src), err)
	}
	return m, nil
}

// importFromStore copies the object, or every object under the prefix,
// that u names in another store.
func importFromStore(ctx context.Context, s storage.Store, prefix string, u *url.URL, kind string) (Manifest, error) {
	key := strings.Trim(u.Path, "/")
	root := *u
	root.Path = ""
	src, err := storage.Open(ctx, root.String())
	if err != nil {
		return Manifest{}, err
	}
	defer src.Close()
	var objs []storage.ObjectInfo
	if key != "" {
		if info, err := src.Stat(ctx, key); err == nil {
			objs = []storage.ObjectInfo{info}
		}
	}
	// Files are named relative to the prefix (or, for one object, by its
	// base name). List sorts by key and every key shares the prefix, so the
	// names come sorted too and objs[i] stays m.Files[i] after Seal.
	strip := key + "/"
	if len(objs) == 0 {
		if key == "" {
			strip = ""
		}
		if objs, err = src.List(ctx, strip); err != nil {
			return Manifest{}, err
		}
		if len(objs) == 0 {
			return Manifest{}, fmt.Errorf("no object or prefix %q in that store", key)
		}
	} else {
		strip = strings.TrimSuffix(key, path.Base(key))
	}
	m := Manifest{Kind: kind, Producer: Producer{Source: storage.Redact(u.String())}}
	for _, o := range objs {
		m.Files = append(m.Files, File{Name: strings.TrimPrefix(o.Key, strip), Size: o.Size, Digest: o.Digest})
	}
	m.Seal()
	dst := prefix + "/" + strings.TrimPrefix(m.Digest, "sha256:")
	for i, o := range objs {
		f := m.Files[i]
		if err := storeOnce(ctx, s, dst+"/"+f.Name, f.Digest, func(key string) error {
			return copyObject(ctx, src, o.Key, s, key, f.Digest)
		}); err != nil {
			return Manifest{}, err
		}
	}
	// Every file was just checked or stored with its digest.
	return publish(ctx, s, dst, m)
}

// storeOnce stores a file with put unless key already holds that digest.
func storeOnce(ctx context.Context, s storage.Store, key, digest string, put func(key string) error) error {
	if info, err := s.Stat(ctx, key); err == nil && info.Digest == digest {
		return nil
	}
	return put(key)
}

func copyObject(ctx context.Context, src storage.Store, srcKey string, dst storage.Store, dstKey, digest string) error {
	rc, _, err := src.Get(ctx, srcKey)
	if err != nil {
		return err
	}
	defer rc.Close()
	_, err = dst.Put(ctx, dstKey, rc, storage.WithDigest(digest))
	return err
}

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
		if err := storeOnce(ctx, s, dst+"/"+f.Name, f.Digest, func(key string) error {
			return upload(ctx, s, key, paths[f.Name], f.Digest)
		}); err != nil {
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
// directory p, named by its slash-separated path relative to p. Symbolic
// links are followed where they lead to a file, and to p itself (a data
// directory linked into a project); a link to a directory inside p is
// refused, naming it, rather than left out: an import never drops a file
// without saying so.
func localFiles(p string) (map[string]string, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return map[string]string{filepath.Base(p): p}, nil
	}
	// WalkDir lists a linked root as the link alone.
	root, err := filepath.EvalSymlinks(p)
	if err != nil {
		return nil, err
	}
	files := map[string]string{}
	err = filepath.WalkDir(root, func(file string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, file)
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			// Named as the user reaches it: under p, not its target.
			shown := filepath.Join(p, rel)
			target, err := os.Stat(file)
			switch {
			case err != nil:
				return fmt.Errorf("%s: %w", shown, err)
			case target.IsDir():
				return fmt.Errorf("%s links to a directory, which an import does not follow: link its files, or import it on its own", shown)
			case !target.Mode().IsRegular():
				return nil
			}
		} else if !d.Type().IsRegular() {
			return nil
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
