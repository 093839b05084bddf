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
# builds bin/nerflow, and runs the tagger's throughput benchmark against the
# same model in PyTorch on the same device and batches: batch 32 (200
# steps) and batch 256 (45 steps), token head and CRF, each with the ratio.
# Results go to stdout and to check-<device>.txt next to this script.
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
log "built in $(( $(date +%s) - start )) s"
if command -v readelf >/dev/null; then
  log "libraries the binary loads: $(readelf -d bin/nerflow | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | grep -E 'torch|c10|jemalloc' | tr '\n' ' ')"
fi
# jemalloc where this machine has libjemalloc2, glibc's malloc otherwise
# (gotch-adapt.sh said which above); the binary reports what it really uses.
log "$(bin/nerflow version | grep '^allocator')"

report=$kit/check-${device/:/}.txt
: > "$report"
bench() {
  local batch=$1 steps=$2
  log "tagger vs PyTorch on $device, batch $batch, $steps steps"
  (cd train/tagger && NERFLOW_BENCH_DEVICE=$device NERFLOW_BENCH_BATCH=$batch NERFLOW_BENCH_STEPS=$steps \
    NERFLOW_BENCH_ROUNDS=${NERFLOW_BENCH_ROUNDS:-3} NERFLOW_BENCH_THREADS=${NERFLOW_BENCH_THREADS:-$(nproc)} \
    NERFLOW_BENCH_DATA=${data:-/nonexistent} NERFLOW_BENCH_PYTHON=$(command -v "$python") \
    ../../bin/train.test -test.run '^$' -test.bench 'TrainThroughput' -test.benchtime 1x) 2>&1 | tee -a "$report"
}
bench 32 "${NERFLOW_KIT_STEPS_32:-200}"
bench 256 "${NERFLOW_KIT_STEPS_256:-45}"
log "results in $report"
