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
# under ./.nerflow): word vectors, then RoSTER's noise-robust training on
# CoNLL-2003's distant labels (CE, GCE, GCE + noisy-label removal), each scored
# on the validation split; reports land in out/conll03-distant. A second run
# is served from the cache.
run: build
	$(BIN) run examples/conll03-distant.yaml --export out/conll03-distant

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
