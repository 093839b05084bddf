#!/usr/bin/env bash
# Packs the offline GPU build kit: everything building nerflow on an
# air-gapped GPU machine needs that such a machine may lack, in one archive.
#
#   scripts/gpu-kit-pack.sh [ARCHIVE]     (default out/nerflow-gpu-kit.tar.xz)
#
# The archive holds
#   go/          this machine's Go toolchain, pruned: no src/cmd (the
#                toolchain's own sources), no tests or testdata, no docs,
#                and only the tools a build uses;
#   nerflow/     the source at HEAD (git archive: commit what you want to
#                ship) with vendor/ (go mod vendor: every module dependency);
#   gotch-src/   gotch's pristine module source, which the GPU machine adapts
#                to its own libtorch (examples and the generator left out);
#   run.sh       scripts/gpu-kit-run.sh: unpack, adapt, build, check.
#
# On the GPU machine (only a CUDA PyTorch or libtorch installed, no network):
#   tar xJf nerflow-gpu-kit.tar.xz && nerflow-gpu-kit/run.sh --data DIR
# See docs/gpu-kit.md.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/out/nerflow-gpu-kit.tar.xz}
log() { printf '[gpu-kit-pack] %s\n' "$*" >&2; }

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
kit=$stage/nerflow-gpu-kit
mkdir -p "$kit"

log "source at $(git -C "$root" rev-parse --short HEAD)"
git -C "$root" archive --format=tar --prefix=nerflow/ HEAD | tar -x -C "$kit"
[[ -z "$(git -C "$root" status --porcelain --untracked-files=no)" ]] || log "note: uncommitted changes are not in the kit"

log "vendoring modules"
# go mod vendor follows go.mod's replace of gotch to third_party/gotch (this
# machine's adaptation); run.sh overwrites that copy with the GPU machine's.
[[ -d "$root/third_party/gotch" ]] || "$root/scripts/gotch-adapt.sh"
(cd "$root" && go mod vendor -o "$kit/nerflow/vendor")

log "gotch's source"
gotch=$(cd "$root" && GOFLAGS=-mod=mod go list -m -f '{{.Version}}' github.com/sugarme/gotch)
src=$(cd "$root" && GOFLAGS=-mod=mod go mod download -json "github.com/sugarme/gotch@$gotch" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[[ -d "$src" ]] || { log "go mod download of gotch $gotch failed"; exit 1; }
mkdir -p "$kit/gotch-src"
tar -C "$src" --exclude=./example --exclude=./gen --exclude='*_test.go' --exclude='*.gt' -cf - . | tar -C "$kit/gotch-src" -xf -
chmod -R u+w "$kit/gotch-src"
echo "$gotch" > "$kit/gotch-src/.version"

log "Go toolchain $(go env GOVERSION), pruned"
goroot=$(go env GOROOT)
goos_arch="$(go env GOHOSTOS)_$(go env GOHOSTARCH)"
mkdir -p "$kit/go/pkg/tool/$goos_arch" "$kit/go/bin"
cp "$goroot/bin/go" "$kit/go/bin/"
cp "$goroot/VERSION" "$goroot/go.env" "$goroot/LICENSE" "$kit/go/"
for tool in asm cgo compile link buildid pack vet; do
  [[ -e "$goroot/pkg/tool/$goos_arch/$tool" ]] && cp "$goroot/pkg/tool/$goos_arch/$tool" "$kit/go/pkg/tool/$goos_arch/"
done
[[ -d "$goroot/pkg/include" ]] && cp -r "$goroot/pkg/include" "$kit/go/pkg/"
tar -C "$goroot" --exclude=./src/cmd --exclude='*_test.go' --exclude=testdata -cf - ./src | tar -C "$kit/go" -xf -

cp "$root/scripts/gpu-kit-run.sh" "$kit/run.sh"
mkdir -p "$(dirname "$out")"
log "compressing (xz -9; a few minutes)"
tar -C "$stage" -cf - nerflow-gpu-kit | xz -9 -T0 > "$out.tmp"
mv "$out.tmp" "$out"
log "wrote $out ($(du -h "$out" | cut -f1)): go $(du -sh "$kit/go" | cut -f1), vendor $(du -sh "$kit/nerflow/vendor" | cut -f1), gotch $(du -sh "$kit/gotch-src" | cut -f1) before compression"
