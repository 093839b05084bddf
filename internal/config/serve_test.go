package config

import (
	"strings"
	"testing"
)

// serve.max_queue: 1024 by default, set by the file or NERFLOW_SERVE_MAX_QUEUE,
// and at least 1.
func TestServeMaxQueue(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("HOME", t.TempDir())
	load := func() (*Config, error) {
		v, err := New("")
		if err != nil {
			t.Fatal(err)
		}
		return Load(v)
	}
	if c, err := load(); err != nil || c.Serve.MaxQueue != 1024 {
		t.Fatalf("default: %+v %v", c, err)
	}
	t.Setenv("NERFLOW_SERVE_MAX_QUEUE", "8")
	if c, err := load(); err != nil || c.Serve.MaxQueue != 8 {
		t.Fatalf("from the environment: %+v %v", c, err)
	}
	t.Setenv("NERFLOW_SERVE_MAX_QUEUE", "0")
	if _, err := load(); err == nil || !strings.Contains(err.Error(), "serve.max_queue") {
		t.Fatalf("a queue of 0: %v", err)
	}
}
