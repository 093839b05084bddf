package storage

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
)

// PutBytes stores b under key.
func PutBytes(ctx context.Context, s Store, key string, b []byte, opts ...PutOption) (ObjectInfo, error) {
	return s.Put(ctx, key, bytes.NewReader(b), opts...)
}

// maxPrealloc bounds the buffer GetBytes sizes from the recorded size, which
// a corrupted record could make absurd.
const maxPrealloc = 1 << 30

// GetBytes reads the whole object under key, verifying its digest.
func GetBytes(ctx context.Context, s Store, key string) ([]byte, ObjectInfo, error) {
	rc, info, err := s.Get(ctx, key)
	if err != nil {
		return nil, info, err
	}
	defer rc.Close()
	var buf bytes.Buffer
	if info.Size >= 0 && info.Size < maxPrealloc {
		// One spare byte lets ReadFrom see EOF without growing the buffer.
		buf.Grow(int(info.Size) + 1)
	}
	if _, err := buf.ReadFrom(rc); err != nil {
		return nil, info, err
	}
	return buf.Bytes(), info, nil
}

// PutJSON stores v under key as indented JSON (artifacts are meant to be
// read by people too) with the content type application/json.
func PutJSON(ctx context.Context, s Store, key string, v any, opts ...PutOption) (ObjectInfo, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return ObjectInfo{}, fmt.Errorf("storage: encoding %q: %w", key, err)
	}
	opts = append([]PutOption{WithContentType("application/json")}, opts...)
	return PutBytes(ctx, s, key, append(b, '\n'), opts...)
}

// GetJSON decodes the JSON object under key into v. The whole object is read
// and its digest verified before decoding, so v is never filled from
// corrupted bytes.
func GetJSON(ctx context.Context, s Store, key string, v any) (ObjectInfo, error) {
	b, info, err := GetBytes(ctx, s, key)
	if err != nil {
		return info, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return info, fmt.Errorf("storage: decoding %q: %w", key, describeJSONError(b, err))
	}
	return info, nil
}

// describeJSONError adds the line and column to the errors of encoding/json
// that carry a byte offset.
func describeJSONError(b []byte, err error) error {
	var offset int64
	switch e := err.(type) {
	case *json.SyntaxError:
		offset = e.Offset
	case *json.UnmarshalTypeError:
		offset = e.Offset
	default:
		return err
	}
	line, col := 1, 1
	for _, c := range b[:min(offset, int64(len(b)))] {
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return fmt.Errorf("line %d, column %d: %w", line, col, err)
}
