package storage

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits on keys. S3 caps a whole key at 1024 bytes and common filesystems
// cap one path element at 255 bytes; a key valid here is valid everywhere.
const (
	MaxKeyLen     = 1024
	MaxSegmentLen = 255
)

// ReservedPrefix starts the names drivers keep for their own bookkeeping
// (for example the filesystem driver's staging files). No key segment may
// start with it, so bookkeeping can never collide with, or be listed as, an
// object.
const ReservedPrefix = ".nerflow"

// ValidateKey reports whether key can name an object, with an error wrapping
// ErrInvalidKey that says what is wrong. A key is a relative slash-separated
// path of valid UTF-8 of at most MaxKeyLen bytes: no leading or trailing
// slash, no empty, "." or ".." segment, no backslash, no control character,
// no segment longer than MaxSegmentLen bytes or starting with ReservedPrefix.
// The rules keep keys portable across drivers and keep a key from ever
// escaping the filesystem driver's root directory.
func ValidateKey(key string) error {
	if key == "" {
		return invalidKey(key, "empty key")
	}
	if len(key) > MaxKeyLen {
		return invalidKey(key, fmt.Sprintf("%d bytes long, more than %d", len(key), MaxKeyLen))
	}
	if strings.HasPrefix(key, "/") {
		return invalidKey(key, "absolute path")
	}
	segs := strings.Split(key, "/")
	for i, seg := range segs {
		if err := validateSegment(key, seg, i == len(segs)-1); err != nil {
			return err
		}
	}
	return validateChars(key)
}

// ValidatePrefix reports whether prefix can be passed to Store.List. The
// empty prefix is valid; otherwise every complete segment (all but the text
// after the last slash) follows the rules of ValidateKey, and the last,
// possibly partial, segment must only use characters a key may use.
func ValidatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if len(prefix) > MaxKeyLen {
		return invalidKey(prefix, fmt.Sprintf("prefix is %d bytes long, more than %d", len(prefix), MaxKeyLen))
	}
	if strings.HasPrefix(prefix, "/") {
		return invalidKey(prefix, "absolute path")
	}
	segs := strings.Split(prefix, "/")
	for _, seg := range segs[:len(segs)-1] {
		if err := validateSegment(prefix, seg, false); err != nil {
			return err
		}
	}
	return validateChars(prefix)
}

func validateSegment(key, seg string, last bool) error {
	switch {
	case seg == "" && last:
		return invalidKey(key, "trailing slash")
	case seg == "":
		return invalidKey(key, "empty path segment")
	case seg == "." || seg == "..":
		return invalidKey(key, fmt.Sprintf("%q path segment", seg))
	case len(seg) > MaxSegmentLen:
		return invalidKey(key, fmt.Sprintf("segment of %d bytes, more than %d", len(seg), MaxSegmentLen))
	case strings.HasPrefix(seg, ReservedPrefix):
		return invalidKey(key, fmt.Sprintf("segment %q starts with the reserved %q", seg, ReservedPrefix))
	}
	return nil
}

func validateChars(key string) error {
	if !utf8.ValidString(key) {
		return invalidKey(key, "not valid UTF-8")
	}
	for i, r := range key {
		switch {
		case r == '\\':
			return invalidKey(key, fmt.Sprintf("backslash at byte %d", i))
		case unicode.IsControl(r):
			return invalidKey(key, fmt.Sprintf("control character %U at byte %d", r, i))
		}
	}
	return nil
}

func invalidKey(key, problem string) error {
	return fmt.Errorf("%w %q: %s", ErrInvalidKey, key, problem)
}
