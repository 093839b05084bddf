package engine

import (
	"context"
	"fmt"
	"net/url"
	"path"
	"strings"

	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/storage"
	"github.com/nerflow/nerflow/storage/artifact"
)

// importDataset makes an external dataset an artifact of the engine's
// store. A local path (or file:// URL) is hashed and uploaded; a store URL
// (s3://bucket/key) names an object, or a prefix holding several, in another
// store, which is copied. Either way the files land under
// datasets/<content digest>/, a copy that is already there is skipped, and
// the artifact's manifest is written beside them, last.
func importDataset(ctx context.Context, st storage.Store, ds string) (stages.Artifact, error) {
	if !strings.Contains(ds, "://") {
		a, err := stages.Import(ctx, st, datasetPrefix, ds, "")
		if err != nil {
			return a, fmt.Errorf("dataset %s: %w", ds, err)
		}
		return a, nil
	}
	u, err := url.Parse(ds)
	if err != nil {
		return stages.Artifact{}, fmt.Errorf("dataset %s: %w", storage.Redact(ds), err)
	}
	if u.Scheme == "file" {
		a, err := stages.Import(ctx, st, datasetPrefix, u.Path, "")
		if err != nil {
			return a, fmt.Errorf("dataset %s: %w", ds, err)
		}
		return a, nil
	}
	key := strings.Trim(u.Path, "/")
	root := *u
	root.Path = ""
	src, err := storage.Open(ctx, root.String())
	if err != nil {
		return stages.Artifact{}, fmt.Errorf("dataset %s: %w", storage.Redact(ds), err)
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
	// names come sorted too and objs[i] stays a.Files[i] after Seal.
	strip := key + "/"
	if len(objs) == 0 {
		if key == "" {
			strip = ""
		}
		if objs, err = src.List(ctx, strip); err != nil {
			return stages.Artifact{}, fmt.Errorf("dataset %s: %w", storage.Redact(ds), err)
		}
		if len(objs) == 0 {
			return stages.Artifact{}, fmt.Errorf("dataset %s: no object or prefix %q in that store", storage.Redact(ds), key)
		}
	} else {
		strip = strings.TrimSuffix(key, path.Base(key))
	}
	a := stages.Artifact{Producer: stages.Producer{Source: storage.Redact(ds)}}
	for _, o := range objs {
		a.Files = append(a.Files, stages.File{Name: strings.TrimPrefix(o.Key, strip), Size: o.Size, Digest: o.Digest})
	}
	a.Seal()
	prefix := datasetPrefix + "/" + strings.TrimPrefix(a.Digest, "sha256:")
	for i, o := range objs {
		f, key := a.Files[i], prefix+"/"+a.Files[i].Name
		if info, err := st.Stat(ctx, key); err == nil && info.Digest == f.Digest {
			continue
		}
		if err := copyObject(ctx, src, o.Key, st, key, f.Digest); err != nil {
			return stages.Artifact{}, fmt.Errorf("dataset %s: %w", storage.Redact(ds), err)
		}
	}
	// The manifest comes last, once every file is in place.
	if a, err = artifact.Write(ctx, st, prefix, a); err != nil {
		return stages.Artifact{}, fmt.Errorf("dataset %s: %w", storage.Redact(ds), err)
	}
	return a, nil
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
