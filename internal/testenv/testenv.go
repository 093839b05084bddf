// Package testenv gives tests the addresses of the real services that
// scripts/services.sh starts (Redis and MinIO on 127.0.0.1).
//
// A test that needs a service calls Redis or S3. When the service's variable
// is unset the test is skipped on a developer's machine, but fails when
// NERFLOW_TEST_REQUIRE_SERVICES=1 (set by `make test` and CI), so that a CI
// run can never pass by skipping the tests that talk to real servers.
package testenv

import (
	"os"
	"testing"
)

// S3Config locates a MinIO/S3 server for tests.
type S3Config struct {
	Endpoint  string // host:port
	AccessKey string
	SecretKey string
}

// Redis returns the address of the test Redis server.
func Redis(t testing.TB) string {
	t.Helper()
	addr := os.Getenv("NERFLOW_TEST_REDIS_ADDR")
	if addr == "" {
		missing(t, "NERFLOW_TEST_REDIS_ADDR")
	}
	return addr
}

// S3 returns the test MinIO server's endpoint and credentials.
func S3(t testing.TB) S3Config {
	t.Helper()
	c := S3Config{
		Endpoint:  os.Getenv("NERFLOW_TEST_S3_ENDPOINT"),
		AccessKey: os.Getenv("NERFLOW_TEST_S3_ACCESS_KEY"),
		SecretKey: os.Getenv("NERFLOW_TEST_S3_SECRET_KEY"),
	}
	if c.Endpoint == "" {
		missing(t, "NERFLOW_TEST_S3_ENDPOINT")
	}
	return c
}

func missing(t testing.TB, name string) {
	t.Helper()
	if os.Getenv("NERFLOW_TEST_REQUIRE_SERVICES") == "1" {
		t.Fatalf("%s is not set but NERFLOW_TEST_REQUIRE_SERVICES=1: start the services with scripts/services.sh", name)
	}
	t.Skipf("%s not set; run `make test` (or eval \"$(scripts/services.sh start)\") to test against real servers", name)
}
