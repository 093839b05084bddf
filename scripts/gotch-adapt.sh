#!/usr/bin/env bash
# Makes gotch build against the libtorch installed on this machine.
#
# gotch v0.8.0 is generated for libtorch 2.0.0, and its libtch/lib.go hard-codes
# CUDA link flags and a libtorch under the module. Debian 12 ships libtorch
# 1.13.1 (CPU only), so we copy gotch's module source into third_party/gotch
# (git-ignored, referenced by go.mod's replace), rewrite the cgo flags for the
# libtorch we find, compile the C++ API once, and replace the body of each
# generated binding that does not compile with a C++ throw inside its PROTECT
# block. Those ops then fail at run time with a clear message instead of
# breaking the build. Against a libtorch that has every op (a CUDA libtorch
# 2.0.0 on a GPU worker) nothing is stubbed.
#
# It also fixes gotch's memory handling (see "Memory fixes" below): the
# output pointer every generated op mallocs and never frees, the 100 KB Go
# ballast per tensor, tensor names that two goroutines could share (the
# "Probably double free tensor" warnings, each a leaked tensor), and the
# handle every in-place op orphans.
#
# With a CUDA libtorch, libtorch_cuda.so is linked with --no-as-needed: no
# symbol of it is referenced directly, so the linker's default --as-needed
# would drop it and its CUDA backend would never register ("this libtorch has
# no CUDA" without LD_PRELOAD).
#
# Allocator: where Debian's libjemalloc2 is installed, jemalloc is linked
# into every binary that uses gotch (-l:libjemalloc.so.2, so the -dev package
# is not needed), ahead of libc, so that its malloc/free serve libtorch too.
# glibc's heap grew 17-22% over six epochs of a 2,000-sentence training;
# jemalloc stayed level (docs/tagger.md, "Memory"). Without the library the
# build falls back to glibc's allocator and says so.
#
# Environment:
#   LIBTORCH   directory of a libtorch distribution (lib/, include/); default:
#              Debian's libtorch-dev under /usr.
#   NERFLOW_GOTCH_DIR  where to write the adapted module (default third_party/gotch).
#   NERFLOW_GOTCH_SRC  gotch's pristine source, instead of the module cache
#              (offline builds: see scripts/gpu-kit-pack.sh).
#   NERFLOW_ALLOCATOR  jemalloc (default: linked where found, glibc otherwise)
#              or glibc (opt out: glibc's malloc even where jemalloc is installed).
set -euo pipefail

GOTCH_VERSION=v0.8.0
root=$(cd "$(dirname "$0")/.." && pwd)
dest=${NERFLOW_GOTCH_DIR:-$root/third_party/gotch}

log() { printf '[gotch-adapt] %s\n' "$*" >&2; }

# Locate libtorch: headers, libraries, and whether it has CUDA.
if [[ -n "${LIBTORCH:-}" ]]; then
  inc="$LIBTORCH/include"; lib="$LIBTORCH/lib"
else
  inc=/usr/include; lib=/usr/lib/$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
fi
[[ -f "$inc/torch/csrc/api/include/torch/torch.h" ]] || { log "no libtorch headers under $inc (install libtorch-dev or set LIBTORCH)"; exit 1; }
[[ -e "$lib/libtorch.so" || -e "$lib/libtorch_cpu.so" ]] || { log "no libtorch libraries under $lib"; exit 1; }
cuda=0
[[ -e "$lib/libtorch_cuda.so" || -e "$lib/libc10_cuda.so" ]] && cuda=1

# Locate jemalloc's shared library (the runtime package, libjemalloc2).
allocator=${NERFLOW_ALLOCATOR:-jemalloc}
jemalloc_dir=""
case $allocator in
  jemalloc)
    for d in "$lib" /usr/lib/$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu) /usr/lib64 /usr/lib /usr/local/lib; do
      if [[ -e "$d/libjemalloc.so.2" ]]; then jemalloc_dir=$d; break; fi
    done
    if [[ -z "$jemalloc_dir" ]]; then
      log "libjemalloc.so.2 not found (install Debian's libjemalloc2): falling back to glibc's malloc"
      allocator=glibc
    fi ;;
  glibc) log "NERFLOW_ALLOCATOR=glibc: glibc's malloc" ;;
  *) log "NERFLOW_ALLOCATOR=$allocator: want jemalloc or glibc"; exit 1 ;;
esac

# The stamp lets a second run return at once when nothing changed.
script_sum=$(cat "$0" "$root"/scripts/gotch-patches/*.patch | sha256sum | cut -c1-16)
libtorch_id=$(ls -l "$lib"/libtorch*.so* 2>/dev/null | sha256sum | cut -c1-16)
stamp="$GOTCH_VERSION script=$script_sum libtorch=$libtorch_id inc=$inc cuda=$cuda allocator=$allocator${jemalloc_dir:+:$jemalloc_dir} src=${NERFLOW_GOTCH_SRC:-modcache}"
if [[ -f "$dest/.nerflow-adapted" && "$(cat "$dest/.nerflow-adapted")" == "$stamp" ]]; then
  log "up to date ($dest)"; exit 0
fi

if [[ -n "${NERFLOW_GOTCH_SRC:-}" ]]; then
  src=$NERFLOW_GOTCH_SRC # offline (the GPU build kit)
  [[ -f "$src/libtch/torch_api_generated.cpp.h" ]] || { log "NERFLOW_GOTCH_SRC=$src holds no gotch source"; exit 1; }
else
  src=$(cd "$root" && GOFLAGS=-mod=mod go mod download -json "github.com/sugarme/gotch@$GOTCH_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [[ -d "$src" ]] || { log "go mod download of gotch $GOTCH_VERSION failed"; exit 1; }
fi

tmp="$dest.tmp.$$"
rm -rf "$tmp"; mkdir -p "$(dirname "$dest")"
cp -r "$src" "$tmp"; chmod -R u+w "$tmp"
trap 'rm -rf "$tmp"' EXIT

cxx_inc="-I$inc -I$inc/torch/csrc/api/include"
cuda_ld=""
if [[ $cuda == 1 ]]; then
  # PyTorch's wheels carry the CUDA runtime in their own nvidia/ packages,
  # which libtorch_cuda.so finds through its RPATH: a system CUDA is used
  # only where there is one.
  cuda_home=${CUDA_HOME:-/usr/local/cuda}
  cuda_libs="-lc10_cuda -ltorch_cuda"
  if [[ -e "$cuda_home/lib64/libcudart.so" ]]; then
    cuda_libs="-L$cuda_home/lib64 -lcudart $cuda_libs"
    cxx_inc="$cxx_inc -I$cuda_home/include"
  fi
  cuda_ld="-Wl,--no-as-needed $cuda_libs -Wl,--as-needed"
fi
# jemalloc goes first and --no-as-needed: nothing references it by name, and
# the dynamic linker binds malloc/free to the first library in the
# executable's load order that defines them, libc being last.
jemalloc_ld=""
if [[ $allocator == jemalloc ]]; then
  jemalloc_ld="-L$jemalloc_dir -Wl,--no-as-needed -l:libjemalloc.so.2 -Wl,--as-needed"
  log "allocator: jemalloc ($jemalloc_dir/libjemalloc.so.2)"
fi
cat > "$tmp/libtch/lib.go" <<GO
package libtch

// Written by nerflow's scripts/gotch-adapt.sh for the libtorch in $lib (cuda=$cuda, allocator=$allocator).

// #cgo LDFLAGS: $jemalloc_ld -lstdc++ -L$lib -Wl,-rpath,$lib -ltorch -lc10 -ltorch_cpu $cuda_ld
// #cgo CFLAGS: -I\${SRCDIR} -O3 -Wall -Wno-unused-variable -Wno-deprecated-declarations -Wno-c++11-narrowing -g -Wno-sign-compare -Wno-unused-function
// #cgo CXXFLAGS: -std=c++17 -I\${SRCDIR} -g -O2 -w $cxx_inc
import "C"
GO

# Compile the C++ API once, syntax only, and collect the generated bindings
# that fail: an error on line N of torch_api_generated.cpp.h belongs to the
# function whose body encloses N.
gen="$tmp/libtch/torch_api_generated.cpp.h"
log "checking gotch's C++ API against libtorch in $lib (cuda=$cuda); this takes a minute or two"
errs="$tmp/compile-errors.txt"
g++ -std=c++17 -fsyntax-only -w -fmax-errors=0 $cxx_inc -I"$tmp/libtch" "$tmp/libtch/torch_api.cpp" 2> "$errs" || true
# Template errors surface inside libstdc++ headers; their "required from here"
# notes point back at the binding, so every generated-file location counts.
grep -o 'torch_api_generated.cpp.h:[0-9]*:[0-9]*: \(error\|  required from here\)' "$errs" | cut -d: -f2 | sort -un > "$tmp/bad-lines.txt" || true
nbad=$(wc -l < "$tmp/bad-lines.txt")
if [[ $nbad -gt 0 ]]; then
  awk -v badfile="$tmp/bad-lines.txt" '
    BEGIN { while ((getline l < badfile) > 0) bad[l] = 1 }
    # First pass over the file (NR==FNR): find each function'"'"'s line range and mark it if it holds an error.
    NR == FNR {
      if ($0 ~ /^[a-z].*\) \{$/) { start = FNR; name = $2; sub(/\(.*/, "", name) }
      if (start && bad[FNR]) stub[start] = name
      if ($0 ~ /^\}$/) start = 0
      next
    }
    # Second pass: inside a marked function, swap the PROTECT body for a throw.
    {
      if ($0 ~ /^[a-z].*\) \{$/) { cur = (FNR in stub) ? stub[FNR] : "" }
      if (cur != "" && $0 ~ /^  PROTECT\($/) { print; print "    throw std::runtime_error(\"" cur " is not available in this libtorch (stubbed by nerflow gotch-adapt)\");"; skip = 1; next }
      if (skip && $0 ~ /^  \)$/) { skip = 0 }
      if (skip) next
      if ($0 ~ /^\}$/) cur = ""
      print
    }' "$gen" "$gen" > "$gen.new"
  mv "$gen.new" "$gen"
  stubbed=$(grep -c 'stubbed by nerflow gotch-adapt' "$gen")
  log "stubbed $stubbed generated bindings that this libtorch lacks"
  g++ -std=c++17 -fsyntax-only -w $cxx_inc -I"$tmp/libtch" "$tmp/libtch/torch_api.cpp" 2> "$errs" || { log "still failing after stubbing:"; head -30 "$errs" >&2; exit 1; }
else
  log "every binding compiles; nothing stubbed"
fi
rm -f "$errs" "$tmp/bad-lines.txt"

# Memory fixes.
# 1. Every generated op mallocs the slot libtorch writes its output handles
#    into, with size 0 (glibc rounds it up to 24 bytes: ops with more than
#    three outputs write past it), and never frees it: 32 bytes leaked per
#    op. Give it room for 8 handles and free it when the op returns.
for f in ts/tensor-generated.go ts/patch.go ts/tensor.go ts/jit.go; do
  perl -0pi -e 's/^(\s*)(\w+) := \(\*lib\.Ctensor\)\(unsafe\.Pointer\(C\.malloc\(0\)\)\)\n(?!\s*defer C\.free)/$1$2 := (*lib.Ctensor)(unsafe.Pointer(C.malloc(64)))\n$1defer C.free(unsafe.Pointer($2))\n/mg; s/\(\*lib\.Ctensor\)\(unsafe\.Pointer\(C\.malloc\(0\)\)\)/(*lib.Ctensor)(unsafe.Pointer(C.malloc(64)))/g' "$tmp/$f"
done
# 2. An in-place op returns a second handle on the same tensor, which gotch
#    put in place of the first, never freeing the first: keep the first and
#    free the second.
perl -pi -e 's/^(\s*)ts\.ctensor = \*ptr$/$1lib.AtFree(*ptr) \/\/ nerflow: the same tensor as ts; keep ts'"'"'s handle/' "$tmp/ts/tensor-generated.go"
# 3. No 100 KB ballast per tensor, unique names, no size queries (see the patch).
for p in "$root"/scripts/gotch-patches/*.patch; do
  patch -s -p1 -d "$tmp" < "$p" || { log "patch $(basename "$p") does not apply"; exit 1; }
done
left=$(grep -c 'C.malloc(0)' "$tmp/ts/tensor-generated.go" || true)
[[ $left == 0 ]] || { log "$left unfixed output slots left"; exit 1; }
log "patched gotch's memory handling (output slots, in-place handles, tensor ballast and names)"
echo "$stamp" > "$tmp/.nerflow-adapted"
# What the binaries built against this copy should report (internal/allocator's test reads it).
echo "$allocator" > "$tmp/.nerflow-allocator"
rm -rf "$dest"; mv "$tmp" "$dest"; trap - EXIT
log "adapted gotch $GOTCH_VERSION in $dest"
