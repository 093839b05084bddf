package kit

import (
	"path/filepath"
	"strings"
	"testing"
)

// A description written by WriteModelSpec reads back whole; one of a
// format outside the range is refused with the file and the formats named.
func TestModelSpec(t *testing.T) {
	type spec struct {
		Format int      `json:"format"`
		Words  []string `json:"words"`
	}
	dir := filepath.Join(t.TempDir(), "model")
	if err := WriteModelSpec(dir, "m.json", spec{Format: 2, Words: []string{"a", "b"}}); err != nil {
		t.Fatal(err)
	}
	var got spec
	format, err := ReadModelSpec(dir, "m.json", 1, 2, &got)
	if err != nil || format != 2 || len(got.Words) != 2 || got.Words[1] != "b" {
		t.Fatalf("read back format %d, %+v, %v", format, got, err)
	}
	for _, tc := range []struct {
		min, max int
		want     string
	}{
		{3, 3, "m.json: format 2, this build reads 3"},
		{3, 4, "m.json: format 2, this build reads 3 to 4"},
	} {
		var s spec
		if _, err := ReadModelSpec(dir, "m.json", tc.min, tc.max, &s); err == nil || err.Error() != tc.want {
			t.Errorf("formats %d..%d: error %v, want %q", tc.min, tc.max, err, tc.want)
		}
		if s.Words != nil {
			t.Errorf("formats %d..%d: the refused description was read: %+v", tc.min, tc.max, s)
		}
	}
	if _, err := ReadModelSpec(dir, "missing.json", 1, 1, &got); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("missing file: %v", err)
	}
}
