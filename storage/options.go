package storage

import (
	"errors"
	"fmt"
	"maps"
	"strings"
)

// Limits on user metadata. S3 carries metadata in HTTP headers and caps it
// at 2 KiB per object; the same limits apply to every driver so that an
// object can move between them.
const (
	MaxMetadataKeyLen = 64
	MaxMetadataSize   = 2048
)

// MetadataContentType is the metadata key for an object's media type. The S3
// driver also sends it as the object's Content-Type.
const MetadataContentType = "content-type"

// reservedMetadataPrefix starts metadata keys the drivers keep for
// themselves (the S3 driver records the digest under "nerflow-digest").
const reservedMetadataPrefix = "nerflow-"

// PutOption configures one Put.
type PutOption func(*PutOptions)

// PutOptions is the result of applying PutOptions; drivers get it from
// NewPutOptions.
type PutOptions struct {
	// Metadata is stored with the object and returned in ObjectInfo.
	Metadata map[string]string
	// Digest, when set, is the digest the content must have: Put fails with
	// ErrDigestMismatch, publishing nothing, when it does not.
	Digest string
	// IfAbsent makes Put publish only where no object is (see IfAbsent).
	IfAbsent bool
}

// WithMetadata stores key=value with the object. Keys are lower-case ASCII
// letters, digits and '-', starting with a letter or digit, at most
// MaxMetadataKeyLen bytes, and must not start with "nerflow-"; values are
// printable ASCII; all metadata together holds at most MaxMetadataSize bytes.
func WithMetadata(key, value string) PutOption {
	return func(o *PutOptions) {
		if o.Metadata == nil {
			o.Metadata = map[string]string{}
		}
		o.Metadata[key] = value
	}
}

// WithContentType records the object's media type ("application/json").
func WithContentType(mediaType string) PutOption {
	return WithMetadata(MetadataContentType, mediaType)
}

// WithDigest makes Put check that the content hashes to digest before
// publishing it, for copies whose digest is known in advance (a file listed
// in a manifest, an artifact moved between stores).
func WithDigest(digest string) PutOption {
	return func(o *PutOptions) { o.Digest = digest }
}

// IfAbsent makes Put publish the object only if key holds none, checked
// and published in one atomic step of the store (a hard link on a
// filesystem, If-None-Match on S3): of two writers racing, exactly one
// publishes, and the other's Put fails with ErrExists, publishing nothing.
func IfAbsent() PutOption {
	return func(o *PutOptions) { o.IfAbsent = true }
}

// NewPutOptions applies opts and validates the result.
func NewPutOptions(opts ...PutOption) (PutOptions, error) {
	var o PutOptions
	for _, opt := range opts {
		opt(&o)
	}
	o.Metadata = maps.Clone(o.Metadata)
	if err := ValidateMetadata(o.Metadata); err != nil {
		return o, err
	}
	if o.Digest != "" {
		if err := ValidateDigest(o.Digest); err != nil {
			return o, fmt.Errorf("storage: WithDigest: %w", err)
		}
	}
	return o, nil
}

// CheckDigest returns an error wrapping ErrDigestMismatch when o asks for a
// digest other than got, the digest of the content Put received.
func (o PutOptions) CheckDigest(key, got string) error {
	if o.Digest != "" && o.Digest != got {
		return fmt.Errorf("%w: put %q: content has digest %s, want %s", ErrDigestMismatch, key, got, o.Digest)
	}
	return nil
}

// ValidateMetadata checks user metadata against the rules of WithMetadata.
func ValidateMetadata(md map[string]string) error {
	size := 0
	for k, v := range md {
		size += len(k) + len(v)
		if err := validateMetadataKey(k); err != nil {
			return err
		}
		for i := 0; i < len(v); i++ {
			if v[i] < 0x20 || v[i] > 0x7e {
				return fmt.Errorf("storage: metadata %q: value has byte %#x at %d; values must be printable ASCII", k, v[i], i)
			}
		}
	}
	if size > MaxMetadataSize {
		return fmt.Errorf("storage: metadata is %d bytes, more than %d", size, MaxMetadataSize)
	}
	return nil
}

func validateMetadataKey(k string) error {
	switch {
	case k == "":
		return errors.New("storage: metadata key is empty")
	case len(k) > MaxMetadataKeyLen:
		return fmt.Errorf("storage: metadata key %q is longer than %d bytes", k, MaxMetadataKeyLen)
	case strings.HasPrefix(k, reservedMetadataPrefix):
		return fmt.Errorf("storage: metadata key %q: the prefix %q is reserved", k, reservedMetadataPrefix)
	case k[0] == '-':
		return fmt.Errorf("storage: metadata key %q starts with '-'", k)
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Errorf("storage: metadata key %q: byte %q at %d; keys are lower-case letters, digits and '-'", k, c, i)
		}
	}
	return nil
}
