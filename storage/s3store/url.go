package s3store

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/dustin/go-humanize"
	"github.com/minio/minio-go/v7/pkg/s3utils"

	"github.com/nerflow/nerflow/storage"
)

// Config says where a store lives and how to reach it.
type Config struct {
	Endpoint string // host[:port] of the S3 server
	Secure   bool   // HTTPS
	Region   string // empty: the server's default
	Bucket   string // created by Open when missing
	// Prefix is prepended, with a slash, to every key: several stores can
	// share a bucket. Empty for the whole bucket.
	Prefix string

	AccessKey    string
	SecretKey    string
	SessionToken string

	// PartSize is the size of the parts of a multipart upload, and the
	// largest object Put buffers in memory. S3 allows 10,000 parts, so it
	// also caps the object size (16 MiB parts: 156 GiB). Zero means
	// DefaultPartSize.
	PartSize uint64
	// SpoolDir holds the temporary files of Puts larger than PartSize;
	// empty means os.TempDir().
	SpoolDir string
}

// Part sizes. S3 requires parts of at least 5 MiB (except the last) and at
// most 5 GiB.
const (
	DefaultPartSize = 16 << 20
	MinPartSize     = 5 << 20
	MaxPartSize     = 5 << 30
)

// Environment variables read for credentials when the URL has none: the
// NERFLOW_ pair first, then the standard AWS ones.
const (
	EnvAccessKey = "NERFLOW_S3_ACCESS_KEY"
	EnvSecretKey = "NERFLOW_S3_SECRET_KEY"
)

var urlOptions = []string{"endpoint", "secure", "region", "access_key", "secret_key", "session_token", "part_size", "spool_dir"}

// ParseURL reads a store URL:
//
//	s3://BUCKET[/PREFIX][?OPTIONS]
//
// with the options
//
//	endpoint=HOST[:PORT]   S3 server (default s3.amazonaws.com)
//	secure=false           plain HTTP (default true: HTTPS)
//	region=REGION          bucket region (default: the server's)
//	part_size=16MiB        multipart part size (5MiB to 5GiB)
//	spool_dir=DIR          where Puts larger than part_size are spooled
//	access_key=, secret_key=, session_token=
//
// Credentials come from the URL if it has them (they then show up wherever
// the URL is logged; prefer the environment), else from NERFLOW_S3_ACCESS_KEY
// and NERFLOW_S3_SECRET_KEY, else from AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN.
func ParseURL(rawURL string) (Config, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return Config{}, fmt.Errorf("s3store: %w", err)
	}
	if u.Scheme != Scheme {
		return Config{}, fmt.Errorf("s3store: scheme %q, want %q", u.Scheme, Scheme)
	}
	c := Config{Bucket: u.Host, Prefix: strings.Trim(u.Path, "/"), Endpoint: "s3.amazonaws.com", Secure: true}
	if err := s3utils.CheckValidBucketNameStrict(c.Bucket); err != nil {
		return Config{}, fmt.Errorf("s3store: bucket %q: %w", c.Bucket, err)
	}
	if c.Prefix != "" {
		if err := storage.ValidateKey(c.Prefix); err != nil {
			return Config{}, fmt.Errorf("s3store: prefix: %w", err)
		}
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return Config{}, fmt.Errorf("s3store: options: %w", err)
	}
	for name, values := range q {
		if !slices.Contains(urlOptions, name) {
			return Config{}, fmt.Errorf("s3store: unknown option %q (known: %s)", name, strings.Join(urlOptions, ", "))
		}
		if len(values) > 1 {
			return Config{}, fmt.Errorf("s3store: option %q given %d times", name, len(values))
		}
	}
	if v := q.Get("endpoint"); v != "" {
		c.Endpoint = v
	}
	if v := q.Get("secure"); v != "" {
		if c.Secure, err = strconv.ParseBool(v); err != nil {
			return Config{}, fmt.Errorf("s3store: option secure=%q is not a boolean", v)
		}
	}
	c.Region = q.Get("region")
	c.SpoolDir = q.Get("spool_dir")
	if v := q.Get("part_size"); v != "" {
		if c.PartSize, err = humanize.ParseBytes(v); err != nil {
			return Config{}, fmt.Errorf("s3store: option part_size=%q: %w", v, err)
		}
	}
	c.AccessKey, c.SecretKey, c.SessionToken = q.Get("access_key"), q.Get("secret_key"), q.Get("session_token")
	if c.AccessKey == "" && c.SecretKey == "" {
		c.AccessKey, c.SecretKey, c.SessionToken = credentialsFromEnv()
	}
	return c, nil
}

func credentialsFromEnv() (access, secret, token string) {
	if access, secret = os.Getenv(EnvAccessKey), os.Getenv(EnvSecretKey); access != "" || secret != "" {
		return access, secret, ""
	}
	return os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY"), os.Getenv("AWS_SESSION_TOKEN")
}

// validate checks c and fills in defaults.
func (c *Config) validate() error {
	if c.PartSize == 0 {
		c.PartSize = DefaultPartSize
	}
	if c.PartSize < MinPartSize || c.PartSize > MaxPartSize {
		return fmt.Errorf("s3store: part size %s is outside S3's range of %s to %s",
			humanize.IBytes(c.PartSize), humanize.IBytes(MinPartSize), humanize.IBytes(MaxPartSize))
	}
	if c.SpoolDir == "" {
		c.SpoolDir = os.TempDir()
	}
	c.Prefix = strings.Trim(c.Prefix, "/")
	switch {
	case c.Bucket == "":
		return errors.New("s3store: no bucket")
	case c.Endpoint == "":
		return errors.New("s3store: no endpoint")
	case c.AccessKey == "" || c.SecretKey == "":
		return fmt.Errorf("s3store: no credentials: set %s and %s (or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)", EnvAccessKey, EnvSecretKey)
	}
	return nil
}
