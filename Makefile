# The two set-up commands of the README:
#   make run    sets up what the main job needs and runs it on embedded defaults
#   make test   sets up everything, starts real Redis and MinIO, runs the tests
SHELL := /bin/bash
GO ?= go
BIN := bin/nerflow
DATA ?= ../shared/data

.PHONY: setup setup-run build run test bench clean

# Everything: what the main job needs, and Redis, MinIO, the Brown corpus
# and Chromium for the tests.
setup:
	scripts/setup.sh all

# What building and the main job need: libtorch, gotch, the word vectors.
setup-run:
	scripts/setup.sh run

build: setup-run
	$(GO) build -o $(BIN) ./cmd/nerflow

# The main job on embedded defaults (in-process Redis and workers, file store
# under ./.nerflow): RoSTER end to end (examples/sample-roster.yaml) on the
# sample shipped in examples/data/brown-press, so that a fresh clone needs
# nothing beside it: distant labels from the sample's gazetteer and a list of
# first names, three partial-label CRFs of different seeds, their ensemble's
# labels learned by a CRF student, the best of those four models on the
# dev split, then the best on dev of that model alone and with the
# gazetteer overlay (its matches combined with the model's entities, in
# mode fill, override or extend) kept as the final model; every step scored on the
# gold dev split beside the distant labels, the final model on the test
# split too, and registered. The per-type tables are printed step by step at the end and
# land in out/sample-roster. A second run is served from the cache. The
# CoNLL-2003 benchmark runs are examples/conll03-*.yaml (they need ../shared).
#
# Each training on one thread, and the three seeds at once: the sample's
# batches of 16 sentences train no faster on two threads than on one
# (docs/tagger.md, Threads), and three one-thread trainings side by side on
# two cores take 1.5 rounds where two at a time take 2 (on a 2-core VM,
# 6 min 18 s -> 4 min 36 s to 5 min 10 s). Trainings at one thread are the same numbers
# however many run at once.
OUT := out/sample-roster
RUN_FLAGS := --threads 1 --concurrency 3
run: build
	$(BIN) run examples/sample-roster.yaml $(RUN_FLAGS) --export $(OUT)
	@for n in $(OUT)/eval-noise* $(OUT)/eval-distil $(OUT)/eval-selftrain $(OUT)/eval-select $(OUT)/eval-overlay-fill $(OUT)/eval-overlay-override $(OUT)/eval-overlay-extend $(OUT)/eval-overlay-capitalized $(OUT)/eval-overlay-typed $(OUT)/eval-first-words $(OUT)/test; do \
		[ -f "$$n/report/report.txt" ] || continue; \
		case $${n##*/} in \
		eval-noise*) h="partial-label CRF $${n##*_}, dev";; \
		eval-distil) h="the ensemble's student, dev";; \
		eval-selftrain) h="self-trained, dev";; \
		eval-select) h="the best of the above on dev, dev";; \
		eval-overlay-fill) h="that model with the gazetteer overlay, mode fill (its entities kept, the matches beside them added), dev";; \
		eval-overlay-override) h="that model with the gazetteer overlay, mode override (the matches kept, its entities beside them added), dev";; \
		eval-overlay-extend) h="that model with the gazetteer overlay, mode extend (as override, but its longer entities keep the matches of their type they hold), dev";; \
		eval-overlay-capitalized) h="that model with the gazetteer overlay, override admitting only its entities that are capitalized phrases, dev";; \
		eval-overlay-typed) h="that, its entities kept only of the types that gain on dev, dev";; \
		eval-first-words) h="the model alone, its entities less a sentence's first word the text writes in lower case, dev";; \
		test) h="final model, test";; esac; \
		echo; echo "== $$h"; cat "$$n/report/report.txt"; done
	@f=$(OUT)/overlay/report/selection.json; [ ! -f $$f ] || { echo; \
		echo "== final model: the best on dev of the model alone and with the overlay (the model alone on a tie)"; \
		awk -F'"' '/"name"/ { name = $$4 } /"f1"/ { f1 = $$3; gsub(/[:, ]/, "", f1); printf "  %-17s dev F1 %5.2f\n", name, 100 * f1 } \
			END { print "  chosen: " name }' $$f; }

# Tests talk to real servers; NERFLOW_TEST_REQUIRE_SERVICES=1 turns a missing
# server into a failure instead of a skip.
test: setup
	@set -e; eval "$$(scripts/services.sh start)"; trap 'scripts/services.sh stop' EXIT; \
	NERFLOW_TEST_REQUIRE_SERVICES=1 $(GO) test -count=1 -timeout 45m ./...

# Benchmarks report ratios against a reference measured in the same run; the
# engine's need the real servers too. The tagger's and the encoder's
# (packages train/tagger and train/encoder: training, pretraining,
# fine-tuning the encoder under the tagger) each run a fixed amount of work
# against PyTorch on the same batches, once, and report the ratios and peak
# resident memory (see docs/tagger.md and docs/encoder.md).
bench:
	NERFLOW_WITH_BENCH=1 scripts/setup.sh
	@set -e; eval "$$(scripts/services.sh start)"; trap 'scripts/services.sh stop' EXIT; \
	$(GO) test -run '^$$' -bench . -benchtime 3x $$($(GO) list ./... | grep -v '/train/tagger$$\|/train/encoder$$'); \
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 90m ./train/tagger ./train/encoder

clean:
	rm -rf bin .nerflow
