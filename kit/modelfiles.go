package kit

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// WriteModelSpec writes a model's description (its architecture,
// vocabulary and a "format" field: whatever Load needs besides the
// weights) as JSON into dir/file, creating dir if needed.
func WriteModelSpec(dir, file string, spec any) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, file), b, 0o644)
}

// ReadModelSpec reads a description that WriteModelSpec wrote into spec,
// and refuses one whose "format" field is outside minFormat..maxFormat (a
// model saved by another build) before the caller reads anything else of
// it. It returns the format; errors name the file.
func ReadModelSpec(dir, file string, minFormat, maxFormat int, spec any) (int, error) {
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return 0, err
	}
	var head struct {
		Format int `json:"format"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return 0, fmt.Errorf("%s: %w", file, err)
	}
	switch {
	case head.Format >= minFormat && head.Format <= maxFormat:
	case minFormat == maxFormat:
		return 0, fmt.Errorf("%s: format %d, this build reads %d", file, head.Format, minFormat)
	default:
		return 0, fmt.Errorf("%s: format %d, this build reads %d to %d", file, head.Format, minFormat, maxFormat)
	}
	if err := json.Unmarshal(b, spec); err != nil {
		return 0, fmt.Errorf("%s: %w", file, err)
	}
	return head.Format, nil
}
