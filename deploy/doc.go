// Package deploy holds nothing but the deployment files of nerflow (Docker
// Compose, Kubernetes, systemd) and the test that validates them offline:
// each file is decoded against its schema (the Kubernetes API types with
// strict decoding, the Compose specification through compose-go, systemd's
// unit syntax through go-systemd), and every nerflow command line in them is
// parsed by this binary's own commands and flags, worker lines planned by
// the worker pool's rules.
package deploy
