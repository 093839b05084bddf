#!/usr/bin/env bash
# Builds nerflow from the offline GPU build kit (scripts/gpu-kit-pack.sh)
# and checks it on this machine's GPU, with no network:
#
#   nerflow-gpu-kit/run.sh [--device cuda:0] [--data DIR] [--python PY] [--libtorch DIR]
#
#   --device    where both sides train (default cuda:0; cpu checks the kit
#               on a machine without a GPU)
#   --data      a directory with CoNLL-2003's train_text.txt and
#               train_label_true.txt (default: random sentences)
#   --python    a Python with PyTorch, for the reference and, without
#               --libtorch, for finding libtorch (default python3)
#   --libtorch  a libtorch distribution (include/, lib/); default: the torch/
#               directory of --python's PyTorch, or Debian's libtorch-dev
#
# The allocator is jemalloc where the machine has Debian's libjemalloc2 and
# glibc's malloc otherwise (gotch-adapt.sh logs the fallback; NERFLOW_ALLOCATOR=glibc
# forces it).
#
# It uses the kit's Go toolchain and vendored modules only (GOPROXY=off,
# GOFLAGS=-mod=vendor, GOTOOLCHAIN=local), adapts gotch to the libtorch,
# builds bin/nerflow, and runs the throughput benchmarks against the same
# models in PyTorch on the same device and batches, each with the ratio: the
# tagger at batch 32 (200 steps) and batch 256 (45 steps), token head and
# CRF; the encoder's pretraining steps at batch 32 (100 steps) and 256 (40
# steps), for each preset of NERFLOW_KIT_PRESETS (default "small medium");
# and, with check finetune, a CRF tagger fine-tuning each preset under its
# BiLSTM, at the same batches and steps as the encoder.
# NERFLOW_KIT_CHECKS (default "tagger encoder"; any of tagger, encoder,
# finetune) picks the checks. Results go
# to stdout and to check-<device>.txt next to this script.
set -euo pipefail

kit=$(cd "$(dirname "$0")" && pwd)
device=cuda:0 data="" python=python3 libtorch=${LIBTORCH:-}
while [[ $# -gt 0 ]]; do
  case $1 in
    --device) device=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --python) python=$2; shift 2 ;;
    --libtorch) libtorch=$2; shift 2 ;;
    *) echo "usage: $0 [--device cuda:N|cpu] [--data DIR] [--python PY] [--libtorch DIR]" >&2; exit 2 ;;
  esac
done
log() { printf '[gpu-kit] %s\n' "$*" >&2; }

export GOROOT=$kit/go PATH=$kit/go/bin:$PATH
export GOTOOLCHAIN=local GOPROXY=off GOFLAGS=-mod=vendor GOSUMDB=off GOWORK=off
export GOCACHE=$kit/cache/go-build GOPATH=$kit/cache/gopath CGO_ENABLED=1
log "$(go version) from $GOROOT"

if [[ -z "$libtorch" ]] && command -v "$python" >/dev/null; then
  libtorch=$("$python" -c 'import os, torch; print(os.path.dirname(torch.__file__))' 2>/dev/null || true)
  [[ -f "$libtorch/include/torch/csrc/api/include/torch/torch.h" ]] || libtorch="" # Debian's python3-torch: headers in /usr
fi
if [[ -n "$libtorch" ]]; then
  export LIBTORCH=$libtorch
  log "libtorch: $LIBTORCH"
else
  unset LIBTORCH
  log "libtorch: the system's (libtorch-dev)"
fi

cd "$kit/nerflow"
NERFLOW_GOTCH_SRC=$kit/gotch-src scripts/gotch-adapt.sh
# The build reads gotch from vendor/: put this machine's adaptation there.
rm -rf vendor/github.com/sugarme/gotch
mkdir -p vendor/github.com/sugarme/gotch
cp -r third_party/gotch/. vendor/github.com/sugarme/gotch/

log "building (the first build compiles gotch's C++ API: several minutes)"
start=$(date +%s)
go build -o bin/nerflow ./cmd/nerflow
go test -c -vet=off -o bin/train.test ./train/tagger
go test -c -vet=off -o bin/encoder.test ./train/encoder
log "built in $(( $(date +%s) - start )) s"
if command -v readelf >/dev/null; then
  log "libraries the binary loads: $(readelf -d bin/nerflow | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | grep -E 'torch|c10|jemalloc' | tr '\n' ' ')"
fi
# jemalloc where this machine has libjemalloc2, glibc's malloc otherwise
# (gotch-adapt.sh said which above); the binary reports what it really uses.
log "$(bin/nerflow version | grep '^allocator')"

report=$kit/check-${device/:/}.txt
: > "$report"
bench() { # package directory, test binary, benchmark, batch, steps, what
  local dir=$1 bin=$2 name=$3 batch=$4 steps=$5 what=$6
  log "$what vs PyTorch on $device, batch $batch, $steps steps"
  (cd "$dir" && NERFLOW_BENCH_DEVICE=$device NERFLOW_BENCH_BATCH=$batch NERFLOW_BENCH_STEPS=$steps \
    NERFLOW_BENCH_ROUNDS=${NERFLOW_BENCH_ROUNDS:-3} NERFLOW_BENCH_THREADS=${NERFLOW_BENCH_THREADS:-$(nproc)} \
    NERFLOW_BENCH_DATA=${data:-/nonexistent} NERFLOW_BENCH_PYTHON=$(command -v "$python") \
    "$bin" -test.run '^$' -test.bench "$name" -test.benchtime 1x) 2>&1 | tee -a "$report"
}
for check in ${NERFLOW_KIT_CHECKS:-tagger encoder}; do
  case $check in
    tagger)
      bench train/tagger ../../bin/train.test TrainThroughput 32 "${NERFLOW_KIT_STEPS_32:-200}" tagger
      bench train/tagger ../../bin/train.test TrainThroughput 256 "${NERFLOW_KIT_STEPS_256:-45}" tagger ;;
    encoder)
      for preset in ${NERFLOW_KIT_PRESETS:-small medium}; do
        NERFLOW_BENCH_PRESET=$preset bench train/encoder ../../bin/encoder.test PretrainThroughput 32 "${NERFLOW_KIT_ENCODER_STEPS_32:-100}" "encoder $preset"
        NERFLOW_BENCH_PRESET=$preset bench train/encoder ../../bin/encoder.test PretrainThroughput 256 "${NERFLOW_KIT_ENCODER_STEPS_256:-40}" "encoder $preset"
      done ;;
    finetune)
      for preset in ${NERFLOW_KIT_PRESETS:-small medium}; do
        NERFLOW_BENCH_PRESET=$preset bench train/encoder ../../bin/encoder.test FineTuneThroughput 32 "${NERFLOW_KIT_ENCODER_STEPS_32:-100}" "fine-tuning $preset"
        NERFLOW_BENCH_PRESET=$preset bench train/encoder ../../bin/encoder.test FineTuneThroughput 256 "${NERFLOW_KIT_ENCODER_STEPS_256:-40}" "fine-tuning $preset"
      done ;;
    *) log "unknown check $check (want tagger, encoder or finetune)"; exit 2 ;;
  esac
done
log "results in $report"
