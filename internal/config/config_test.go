package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPrecedenceFileThenEnv(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "nerflow.yaml")
	if err := os.WriteFile(file, []byte("store: s3://bucket/x?endpoint=minio:9000\nredis:\n  addr: redis:6379\nlog:\n  level: debug\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("NERFLOW_REDIS_ADDR", "10.0.0.1:6379")
	v, err := New(file)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Load(v)
	if err != nil {
		t.Fatal(err)
	}
	if c.Store != "s3://bucket/x?endpoint=minio:9000" {
		t.Errorf("store from file: got %q", c.Store)
	}
	if c.Redis.Addr != "10.0.0.1:6379" {
		t.Errorf("environment must override the file: got redis.addr %q", c.Redis.Addr)
	}
	if c.Log.Level != "debug" || c.Log.Format != "text" {
		t.Errorf("log: got %+v, want level from file and default format", c.Log)
	}
}

func TestDefaultsWithoutFile(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("HOME", t.TempDir())
	v, err := New("")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Load(v)
	if err != nil {
		t.Fatal(err)
	}
	if c.Store != Defaults["store"] || c.Redis.Addr != "" {
		t.Errorf("embedded defaults expected, got %+v", c)
	}
}

func TestErrorsNameTheProblem(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct{ yaml, want string }{
		"unknown key":  {"stor: x\n", "stor"},
		"bad level":    {"log:\n  level: loud\n", `log.level: "loud"`},
		"bad format":   {"log:\n  format: xml\n", `log.format: "xml"`},
		"empty store":  {"store: \"\"\n", "store: must be"},
		"broken yaml":  {"store: [\n", "nerflow.yaml"},
		"missing file": {"", "nerflow.yaml"},
	} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"), "nerflow.yaml")
			if tc.yaml != "" {
				os.MkdirAll(filepath.Dir(file), 0o755)
				if err := os.WriteFile(file, []byte(tc.yaml), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			v, err := New(file)
			if err == nil {
				_, err = Load(v)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestSearchFindsYAMLNotTheBinary(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("HOME", t.TempDir())
	// The binary sits beside the user when run as ./nerflow from its folder.
	if err := os.WriteFile("nerflow", []byte("\x7fELF\x02\x01\x01\x00"), 0o755); err != nil {
		t.Fatal(err)
	}
	v, err := New("")
	if err != nil {
		t.Fatalf("a file named nerflow must not be read as config: %v", err)
	}
	if _, err := Load(v); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("nerflow.yaml", []byte("log:\n  format: json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	v, err = New("")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Load(v)
	if err != nil {
		t.Fatal(err)
	}
	if c.Log.Format != "json" {
		t.Errorf("nerflow.yaml in the working directory was not read: %+v", c.Log)
	}
}
