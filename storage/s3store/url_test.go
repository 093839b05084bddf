package s3store

import (
	"strings"
	"testing"
)

func TestParseURL(t *testing.T) {
	t.Setenv(EnvAccessKey, "")
	t.Setenv(EnvSecretKey, "")
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")

	got, err := ParseURL("s3://artifacts/team/nerflow/?endpoint=127.0.0.1:9390&secure=false&region=eu-west-1&part_size=32MiB&spool_dir=/var/tmp&access_key=AK&secret_key=SK")
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Endpoint: "127.0.0.1:9390", Secure: false, Region: "eu-west-1", Bucket: "artifacts",
		Prefix: "team/nerflow", AccessKey: "AK", SecretKey: "SK", PartSize: 32 << 20, SpoolDir: "/var/tmp"}
	if got != want {
		t.Errorf("ParseURL =\n%+v, want\n%+v", got, want)
	}

	got, err = ParseURL("s3://artifacts")
	if err != nil {
		t.Fatal(err)
	}
	if want := (Config{Endpoint: "s3.amazonaws.com", Secure: true, Bucket: "artifacts"}); got != want {
		t.Errorf("defaults: %+v, want %+v", got, want)
	}
	if err := got.validate(); err == nil || !strings.Contains(err.Error(), EnvAccessKey) {
		t.Errorf("validate without credentials: %v, want an error naming %s", err, EnvAccessKey)
	}
}

func TestParseURLCredentialPrecedence(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "aws-ak")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "aws-sk")
	t.Setenv("AWS_SESSION_TOKEN", "aws-tok")
	t.Setenv(EnvAccessKey, "")
	t.Setenv(EnvSecretKey, "")
	check := func(url, ak, sk, tok string) {
		t.Helper()
		c, err := ParseURL(url)
		if err != nil {
			t.Fatal(err)
		}
		if c.AccessKey != ak || c.SecretKey != sk || c.SessionToken != tok {
			t.Errorf("%s: credentials %q %q %q, want %q %q %q", url, c.AccessKey, c.SecretKey, c.SessionToken, ak, sk, tok)
		}
	}
	check("s3://bkt", "aws-ak", "aws-sk", "aws-tok")
	t.Setenv(EnvAccessKey, "nf-ak")
	t.Setenv(EnvSecretKey, "nf-sk")
	check("s3://bkt", "nf-ak", "nf-sk", "")
	check("s3://bkt?access_key=url-ak&secret_key=url-sk", "url-ak", "url-sk", "")
}

func TestParseURLErrors(t *testing.T) {
	for url, problem := range map[string]string{
		"file:///x":                    `scheme "file"`,
		"s3://UPPER":                   "bucket",
		"s3://bkt?endpont=x":           `unknown option "endpont"`,
		"s3://bkt?secure=maybe":        "not a boolean",
		"s3://bkt?part_size=lots":      "part_size",
		"s3://bkt?region=a&region=b":   "given 2 times",
		"s3://bkt/a//c":                "prefix",
		"s3://bkt/../c":                "prefix",
		"s3://bkt?endpoint=x&%zz=1":    "options",
		"s3://bkt/.nerflow-tmp-1/data": "prefix",
	} {
		_, err := ParseURL(url)
		if err == nil || !strings.Contains(err.Error(), problem) {
			t.Errorf("ParseURL(%q) = %v, want an error about %s", url, err, problem)
		}
	}
	c := Config{Endpoint: "e", Bucket: "b", AccessKey: "a", SecretKey: "s", PartSize: 1 << 20}
	if err := c.validate(); err == nil || !strings.Contains(err.Error(), "part size") {
		t.Errorf("1 MiB parts: %v, want a part size error", err)
	}
}
