// Package s3store is the S3 driver of package storage, for MinIO or any S3
// server, through minio-go. It registers the URL scheme "s3"; see ParseURL
// for the URL's form.
//
// # Digests
//
// Each object records the SHA-256 digest of its content in the user metadata
// "nerflow-digest". S3 takes an object's metadata when an upload starts,
// and a stream's digest is known only at its end, so Put reads the stream
// before uploading: into memory up to the part size (the common case:
// manifests, reports, corpora), beyond that into a temporary spool file.
// Then the digest goes up with a single PutObject, and S3's own atomic
// publication applies: the object appears whole when the upload completes,
// and a failed or cancelled upload (multipart ones are aborted) leaves
// nothing.
//
// The alternative, streaming to a staging key and then server-side copying
// it to the real key with the digest added, needs no local disk but doubles
// the server's writes, and a crash between the steps leaves complete staging
// objects in the bucket that something must find and sweep. A spool file
// lives on the worker and is deleted with it; workers store artifacts they
// just produced locally, so they have the disk.
package s3store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/nerflow/nerflow/storage"
)

// Scheme is the URL scheme of this driver.
const Scheme = "s3"

// driver names the driver in its errors.
const driver = "s3store"

func init() {
	storage.Register(Scheme, func(ctx context.Context, rawURL string) (storage.Store, error) {
		c, err := ParseURL(rawURL)
		if err != nil {
			return nil, err
		}
		return Open(ctx, c)
	})
}

const (
	// metaDigest is the user metadata key holding the digest. The
	// "nerflow-" prefix is reserved, so no user metadata can replace it.
	metaDigest = "nerflow-digest"
	// amzMeta prefixes user metadata headers. Keys are given to minio-go
	// with it so that a key like "content-type" or "expires" travels as
	// metadata, not as the HTTP header of that name.
	amzMeta = "x-amz-meta-"
)

// Store is a storage.Store on an S3 bucket. It is safe for concurrent use.
type Store struct {
	client *minio.Client
	cfg    Config
	prefix string // cfg.Prefix + "/", or "" for the whole bucket
}

var _ storage.Store = (*Store)(nil)

// Open connects to the server, checks the credentials and creates the
// bucket if it does not exist.
func Open(ctx context.Context, c Config) (*Store, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	client, err := minio.New(c.Endpoint, &minio.Options{
		Creds:  credentials.NewStaticV4(c.AccessKey, c.SecretKey, c.SessionToken),
		Secure: c.Secure,
		Region: c.Region,
	})
	if err != nil {
		return nil, fmt.Errorf("s3store: %w", err)
	}
	s := &Store{client: client, cfg: c}
	if c.Prefix != "" {
		s.prefix = c.Prefix + "/"
	}
	if err := s.ensureBucket(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Store) ensureBucket(ctx context.Context) error {
	exists, err := s.client.BucketExists(ctx, s.cfg.Bucket)
	if err != nil {
		return fmt.Errorf("s3store: checking bucket %q at %s: %w", s.cfg.Bucket, s.cfg.Endpoint, err)
	}
	if exists {
		return nil
	}
	err = s.client.MakeBucket(ctx, s.cfg.Bucket, minio.MakeBucketOptions{Region: s.cfg.Region})
	if err != nil && errorCode(err) != minio.BucketAlreadyOwnedByYou {
		return fmt.Errorf("s3store: creating bucket %q at %s: %w", s.cfg.Bucket, s.cfg.Endpoint, err)
	}
	return nil
}

// Client is the underlying minio-go client, for tests and tools that need
// S3 features the Store interface does not have (presigned URLs).
func (s *Store) Client() *minio.Client { return s.client }

// Location returns the bucket and object name that hold key.
func (s *Store) Location(key string) (bucket, object string, err error) {
	if err := storage.ValidateKey(key); err != nil {
		return "", "", err
	}
	object = s.prefix + key
	if len(object) > storage.MaxKeyLen {
		return "", "", fmt.Errorf("%w %q: with the store's prefix it is %d bytes long, more than %d",
			storage.ErrInvalidKey, key, len(object), storage.MaxKeyLen)
	}
	return s.cfg.Bucket, object, nil
}

// String returns the store's URL, without credentials.
func (s *Store) String() string {
	return fmt.Sprintf("s3://%s/%s?endpoint=%s&secure=%t", s.cfg.Bucket, s.cfg.Prefix, s.cfg.Endpoint, s.cfg.Secure)
}

// Put implements storage.Store.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, opts ...storage.PutOption) (storage.ObjectInfo, error) {
	info, err := s.put(ctx, key, r, opts)
	if err != nil {
		return storage.ObjectInfo{}, storage.OpError(driver, "put", key, err)
	}
	return info, nil
}

func (s *Store) put(ctx context.Context, key string, r io.Reader, opts []storage.PutOption) (storage.ObjectInfo, error) {
	o, err := storage.PreparePut(key, opts)
	if err != nil {
		return storage.ObjectInfo{}, err
	}
	bucket, object, err := s.Location(key)
	if err != nil {
		return storage.ObjectInfo{}, err
	}
	sp := &spool{limit: s.cfg.PartSize, dir: s.cfg.SpoolDir}
	defer sp.release()
	info, err := o.StageContent(ctx, key, sp, r)
	if err != nil {
		return storage.ObjectInfo{}, err
	}
	body, err := sp.content()
	if err != nil {
		return storage.ObjectInfo{}, err
	}
	headers := map[string]string{amzMeta + metaDigest: info.Digest}
	for k, v := range o.Metadata {
		headers[amzMeta+k] = v
	}
	po := minio.PutObjectOptions{
		UserMetadata: headers,
		ContentType:  o.Metadata[storage.MetadataContentType],
		PartSize:     s.cfg.PartSize,
	}
	if o.IfAbsent {
		po.SetMatchETagExcept("*") // If-None-Match: *
	}
	up, err := s.client.PutObject(ctx, bucket, object, body, info.Size, po)
	if err != nil && minio.ToErrorResponse(err).Code == "NoSuchUpload" {
		// Parts go up side by side; when one fails (MinIO out of space),
		// the server may drop the upload before the part that says why
		// answers, and the first error back is "no such upload", which
		// names no cause. Once more as one PUT where S3 allows it (5 GiB):
		// there is no upload for the server to drop, so its own answer
		// comes back; larger objects go one part at a time, which names
		// the cause less reliably (the server may still drop the upload).
		if body, err = sp.content(); err == nil {
			po.NumThreads = 1
			po.DisableMultipart = info.Size <= maxSinglePut
			up, err = s.client.PutObject(ctx, bucket, object, body, info.Size, po)
		}
	}
	if err != nil {
		switch code := minio.ToErrorResponse(err).Code; {
		case o.IfAbsent && code == "PreconditionFailed":
			return storage.ObjectInfo{}, fmt.Errorf("%w: %q", storage.ErrExists, key)
		case code == "XMinioStorageFull" || code == "StorageFull":
			return storage.ObjectInfo{}, storage.NoSpace(Scheme+"://"+bucket, key, err)
		}
		return storage.ObjectInfo{}, err
	}
	info.ModTime = up.LastModified
	if info.ModTime.IsZero() {
		info.ModTime = time.Now()
	}
	return info, nil
}

// maxSinglePut is the largest object S3 takes in one PUT.
const maxSinglePut = 5 << 30

// spool holds the content of a Put until its digest is known: in memory up
// to limit bytes (one part), beyond that in a temporary file in dir.
type spool struct {
	limit uint64
	dir   string
	buf   bytes.Buffer
	f     *os.File
}

func (sp *spool) Write(p []byte) (int, error) {
	if sp.f == nil && uint64(sp.buf.Len()+len(p)) <= sp.limit {
		return sp.buf.Write(p)
	}
	if sp.f == nil {
		f, err := os.CreateTemp(sp.dir, "nerflow-s3-spool-*")
		if err != nil {
			return 0, fmt.Errorf("spooling the upload: %w", err)
		}
		sp.f = f
		if _, err := sp.buf.WriteTo(f); err != nil {
			return 0, fmt.Errorf("spooling the upload: %w", err)
		}
	}
	n, err := sp.f.Write(p)
	if err != nil {
		err = fmt.Errorf("spooling the upload: %w", err)
	}
	return n, err
}

// content returns the spooled bytes for upload.
func (sp *spool) content() (io.Reader, error) {
	if sp.f == nil {
		return bytes.NewReader(sp.buf.Bytes()), nil
	}
	if _, err := sp.f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("spooling the upload: %w", err)
	}
	return sp.f, nil
}

// release removes the spool file, if any.
func (sp *spool) release() {
	if sp.f != nil {
		sp.f.Close()
		os.Remove(sp.f.Name())
	}
}

// Get implements storage.Store. The body and the metadata come from one GET,
// so they describe the same version even while a Put replaces the object.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, storage.ObjectInfo, error) {
	bucket, object, err := s.Location(key)
	if err != nil {
		return nil, storage.ObjectInfo{}, storage.OpError(driver, "get", key, err)
	}
	core := minio.Core{Client: s.client}
	rc, oi, _, err := core.GetObject(ctx, bucket, object, minio.GetObjectOptions{})
	if err != nil {
		return nil, storage.ObjectInfo{}, storage.OpError(driver, "get", key, mapError(err))
	}
	info, err := objectInfo(key, oi)
	if err != nil {
		rc.Close()
		return nil, storage.ObjectInfo{}, storage.OpError(driver, "get", key, err)
	}
	return storage.VerifyReader(ctx, rc, info), info, nil
}

// Stat implements storage.Store.
func (s *Store) Stat(ctx context.Context, key string) (storage.ObjectInfo, error) {
	info, err := s.stat(ctx, key)
	if err != nil {
		return storage.ObjectInfo{}, storage.OpError(driver, "stat", key, err)
	}
	return info, nil
}

func (s *Store) stat(ctx context.Context, key string) (storage.ObjectInfo, error) {
	bucket, object, err := s.Location(key)
	if err != nil {
		return storage.ObjectInfo{}, err
	}
	oi, err := s.client.StatObject(ctx, bucket, object, minio.StatObjectOptions{})
	if err != nil {
		return storage.ObjectInfo{}, mapError(err)
	}
	return objectInfo(key, oi)
}

// List implements storage.Store. MinIO returns user metadata in listings;
// other servers do not, and then each object is stat'ed for its digest.
func (s *Store) List(ctx context.Context, prefix string) ([]storage.ObjectInfo, error) {
	infos, err := s.list(ctx, prefix)
	if err != nil {
		return nil, storage.OpError(driver, "list", prefix, err)
	}
	return infos, nil
}

func (s *Store) list(ctx context.Context, prefix string) ([]storage.ObjectInfo, error) {
	if err := storage.ValidatePrefix(prefix); err != nil {
		return nil, err
	}
	infos := []storage.ObjectInfo{}
	opts := minio.ListObjectsOptions{Prefix: s.prefix + prefix, Recursive: true, WithMetadata: true}
	for oi := range s.client.ListObjectsIter(ctx, s.cfg.Bucket, opts) {
		if oi.Err != nil {
			return nil, mapError(oi.Err)
		}
		key := strings.TrimPrefix(oi.Key, s.prefix)
		if err := storage.ValidateKey(key); err != nil {
			return nil, fmt.Errorf("object %q in bucket %q was not written through nerflow: %w", oi.Key, s.cfg.Bucket, err)
		}
		info, err := objectInfo(key, oi)
		if err != nil {
			info, err = s.stat(ctx, key)
		}
		switch {
		case errors.Is(err, storage.ErrNotFound):
			continue // deleted since the listing
		case err != nil:
			return nil, err
		}
		infos = append(infos, info)
	}
	// S3 lists in UTF-8 byte order already; sorting costs little and does
	// not trust every server to.
	slices.SortFunc(infos, func(a, b storage.ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return infos, nil
}

// Delete implements storage.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	bucket, object, err := s.Location(key)
	if err == nil {
		err = s.client.RemoveObject(ctx, bucket, object, minio.RemoveObjectOptions{})
	}
	if err != nil && !errors.Is(mapError(err), storage.ErrNotFound) {
		return storage.OpError(driver, "delete", key, err)
	}
	return nil
}

// Close implements storage.Store; the HTTP client needs no closing.
func (s *Store) Close() error { return nil }

// objectInfo converts minio-go's description of an object.
func objectInfo(key string, oi minio.ObjectInfo) (storage.ObjectInfo, error) {
	info := storage.ObjectInfo{Key: key, Size: oi.Size, ModTime: oi.LastModified}
	for k, v := range oi.UserMetadata {
		k = strings.ToLower(k)
		if k == metaDigest {
			info.Digest = v
			continue
		}
		if info.Metadata == nil {
			info.Metadata = map[string]string{}
		}
		info.Metadata[k] = v
	}
	if info.Digest == "" {
		return storage.ObjectInfo{}, fmt.Errorf("%w: object %q has no %s metadata (not written through nerflow?)",
			storage.ErrDigestMismatch, oi.Key, metaDigest)
	}
	return info, nil
}

// mapError turns S3's "no such key" into storage.ErrNotFound.
func mapError(err error) error {
	if errorCode(err) == minio.NoSuchKey {
		return fmt.Errorf("%w (%v)", storage.ErrNotFound, err)
	}
	return err
}

func errorCode(err error) string {
	var resp minio.ErrorResponse
	if errors.As(err, &resp) {
		return resp.Code
	}
	return ""
}
