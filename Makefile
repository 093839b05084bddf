# The two set-up commands of the README:
#   make run    sets up the machine and runs the main job on embedded defaults
#   make test   sets up the machine, starts real Redis and MinIO, runs the tests
SHELL := /bin/bash
GO ?= go
BIN := bin/nerflow
DATA ?= ../shared/data

.PHONY: setup build run test bench clean

setup:
	scripts/setup.sh

build: setup
	$(GO) build -o $(BIN) ./cmd/nerflow

# The main job on embedded defaults (in-process Redis and workers, file store
# under ./.nerflow), on the sample shipped in examples/data/brown-press so that
# a fresh clone needs nothing beside it: distant labels from the sample's
# gazetteer, word vectors, then RoSTER's noise-robust tagger (GCE + noisy-label
# removal) and plain cross entropy on those labels, each scored on the gold dev
# and test splits and registered; the per-type tables are printed at the end
# and land in out/sample-distant. A second run is served from the cache. The
# CoNLL-2003 benchmark runs are examples/conll03-*.yaml (they need ../shared).
run: build
	$(BIN) run examples/sample-distant.yaml --export out/sample-distant
	@for r in out/sample-distant/*/report/report.txt; do \
		n=$${r#out/sample-distant/}; echo; echo "== $${n%%/*}"; cat "$$r"; done

# Tests talk to real servers; NERFLOW_TEST_REQUIRE_SERVICES=1 turns a missing
# server into a failure instead of a skip.
test: setup
	@set -e; eval "$$(scripts/services.sh start)"; trap 'scripts/services.sh stop' EXIT; \
	NERFLOW_TEST_REQUIRE_SERVICES=1 $(GO) test -count=1 -timeout 45m ./...

# Benchmarks report ratios against a reference measured in the same run; the
# engine's need the real servers too. The tagger's (package train) each run a
# fixed amount of work against PyTorch on the same batches, once, and report
# the ratios and peak resident memory (see docs/tagger.md).
bench:
	NERFLOW_WITH_BENCH=1 scripts/setup.sh
	@set -e; eval "$$(scripts/services.sh start)"; trap 'scripts/services.sh stop' EXIT; \
	$(GO) test -run '^$$' -bench . -benchtime 3x $$($(GO) list ./... | grep -v '/train$$'); \
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 90m ./train

clean:
	rm -rf bin .nerflow
