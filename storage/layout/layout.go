// Package layout is where nerflow keeps things in its store: the one place
// that builds (and parses) the keys of node records, attempt outputs,
// checkpoints, imported datasets, run manifests, live-run markers and the
// model registry. The engine, the registry, the scheduler and the CLI all
// find their objects through it, so the layout documented in docs/engine.md
// is this file.
//
//	nodes/<key>.json                       committed node record (the cache)
//	artifacts/<key>-<attempt>-<output>/…   an attempt's output files
//	checkpoints/<key>/…                    latest checkpoint of a resumable node
//	datasets/<digest>/…                    imported external datasets
//	blobs/sha256/<hex>                     a large file shared by artifacts
//	runs/<run>/manifest.json               a run's manifest
//	live/<run>                             marker of a run that has not ended
//	registry/models/<name>/<n>.json        a registered model version
//	registry/models/<name>/tags.json       its tags
//	registry/synced.json                   runs the registry has examined
package layout

import (
	"strconv"
	"strings"
)

// Node records: "nodes/<key>.json" exists once the node's outputs are
// committed.
const nodesPrefix = "nodes/"

// NodeRecord is the key of the record of node key.
func NodeRecord(key string) string { return nodesPrefix + key + ".json" }

// Nodes is the prefix of every node record.
const Nodes = nodesPrefix

// NodeOfRecord returns the node key whose record key is, and false for a
// key under Nodes that is no node record.
func NodeOfRecord(key string) (string, bool) {
	k, ok := strings.CutSuffix(strings.TrimPrefix(key, nodesPrefix), ".json")
	return k, ok && strings.HasPrefix(key, nodesPrefix) && k != "" && !strings.Contains(k, "/")
}

// AttemptOutputs starts the prefixes of the outputs of one attempt of
// node key: output o is at AttemptOutputs(key, attempt)+o, its files at
// "artifacts/<key>-<attempt>-<output>/<file>" (their manifests are in the
// node record). Each attempt has its own, so that two attempts of one node
// (a worker presumed dead but alive, a resubmission racing a run) never
// overwrite each other's files; the record names the attempt that won.
// Key, attempt and output make one segment, not three: on a filesystem
// store every segment is a directory, and each costs a node a mkdir, an
// inode and an fsync (a no-op node with one output now costs three fsyncs,
// where it cost four).
func AttemptOutputs(key, attempt string) string { return "artifacts/" + key + "-" + attempt + "-" }

// Checkpoints is the prefix of the checkpoints of node key, shared by its
// attempts so that a retry resumes where the last one stopped.
func Checkpoints(key string) string { return "checkpoints/" + key }

// Datasets is the prefix of imported external datasets: each lands under
// "datasets/<hex of its content digest>" (see artifact.Import).
const Datasets = "datasets"

// Blobs is the prefix of shared files: a large file an artifact holds
// (word vectors a checkpoint carries unchanged, a language model's
// weights) is stored once under the hex of its content digest, and every
// artifact with a file of that content refers to it (artifact.File.Blob).
const Blobs = "blobs/"

// Blob is the key of the shared file whose content digest is digest
// ("sha256:<hex>").
func Blob(digest string) string { return Blobs + strings.Replace(digest, ":", "/", 1) }

// DigestOfBlob returns the content digest that key, a key under Blobs,
// stores, and false for another key.
func DigestOfBlob(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, Blobs)
	algo, hex, cut := strings.Cut(rest, "/")
	return algo + ":" + hex, ok && cut && algo == "sha256" && hex != "" && !strings.Contains(hex, "/")
}

// Runs is the prefix of run manifests.
const Runs = "runs/"

const manifestName = "/manifest.json"

// RunManifest is the key of run's manifest.
func RunManifest(run string) string { return Runs + run + manifestName }

// RunOfManifest returns the run whose manifest key is key, and false for a
// key under Runs that is no run manifest.
func RunOfManifest(key string) (string, bool) {
	id, ok := strings.CutSuffix(strings.TrimPrefix(key, Runs), manifestName)
	return id, ok && strings.HasPrefix(key, Runs) && id != "" && !strings.Contains(id, "/")
}

// Live is the prefix of the markers of runs that have not ended: written
// at submit (and retry), deleted once the run's final manifest is written,
// for the reconciler to find runs that Redis forgot.
const Live = "live/"

// LiveMarker is the key of run's live marker.
func LiveMarker(run string) string { return Live + run }

// RunOfLiveMarker returns the run that marker key marks.
func RunOfLiveMarker(key string) (string, bool) {
	id, ok := strings.CutPrefix(key, Live)
	return id, ok && id != ""
}

// Registry keys.
const (
	// Models is the prefix of every registered model.
	Models = "registry/models/"
	// RegistrySynced records the run manifests the registry examined.
	RegistrySynced = "registry/synced.json"
)

// Model is the prefix of the versions and tags of model name.
func Model(name string) string { return Models + name + "/" }

// ModelVersion is the key of version n of model name.
func ModelVersion(name string, n int) string { return Model(name) + strconv.Itoa(n) + ".json" }

// ModelTags is the key of the tags of model name.
func ModelTags(name string) string { return Model(name) + "tags.json" }

// ModelOf returns the model name of a key under Models.
func ModelOf(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, Models)
	name, _, _ := strings.Cut(rest, "/")
	return name, ok && name != ""
}

// VersionOf returns the version number that key, a key under Model(name),
// stores, and false for another key (its tags).
func VersionOf(name, key string) (int, bool) {
	s, ok := strings.CutSuffix(strings.TrimPrefix(key, Model(name)), ".json")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n > 0
}
