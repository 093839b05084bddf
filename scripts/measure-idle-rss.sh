#!/usr/bin/env bash
# Measures a worker's resident memory idle before and after it runs one
# small training node (docs/operations.md, "Measured": the idle worker's
# memory): a `nerflow worker` (one thread) on a Redis of its own and the
# file store of a scripts/simulate-nightly.sh directory, where the vectors
# are cached, then one more "night" of that simulation submitted to it.
# With --nights 0 the store is empty, and the worker builds the vectors
# table (reading the 307 MB package) before it trains.
#
#   scripts/simulate-nightly.sh --nights 1 --dir DIR
#   scripts/measure-idle-rss.sh --dir DIR [--bin PATH] [--settle 20]
#
# Prints the worker's VmRSS (MiB) idle after start, its peak (VmHWM), and
# idle --settle seconds after the run ended, with the worker's log lines
# about returning memory.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin="" dir="" settle=20
while (($#)); do
  case $1 in
    --bin) bin=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --settle) settle=$2; shift 2 ;;
    *) echo "usage: $0 --dir DIR [--bin PATH] [--settle SECONDS]" >&2; exit 2 ;;
  esac
done
log() { printf '[measure-idle-rss] %s\n' "$*" >&2; }
[[ -f $dir/spec.yaml ]] || { log "--dir: run scripts/simulate-nightly.sh --dir DIR first"; exit 2; }
if [[ -z $bin ]]; then
  bin=$dir/nerflow
  [[ -x $bin ]] || (cd "$root" && go build -o "$bin" ./cmd/nerflow)
fi

port=${NERFLOW_MEASURE_REDIS_PORT:-6397}
redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no --daemonize yes \
  --pidfile "$dir/redis-$port.pid" --logfile "$dir/redis-$port.log" >/dev/null
worker=""
cleanup() {
  [[ -n $worker ]] && kill "$worker" 2>/dev/null && wait "$worker" 2>/dev/null
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
}
trap cleanup EXIT
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done

mib() { awk -v f="$1:" '$1 == f {print int($2 / 1024)}' "/proc/$worker/status"; }
common=(--redis "127.0.0.1:$port" --store "file://$dir/store")
"$bin" worker "${common[@]}" --threads 1 --queues cpu >"$dir/worker.log" 2>&1 &
worker=$!
sleep 5
start=$(mib VmRSS)

# The next night's window of sentences: a new training.
lines=$(wc -l <"$dir/data/brown-press/train.txt")
from=$(( ($(date +%s) % (lines - 100)) + 1 ))
sed -n "${from},$((from + 99))p" "$dir/data/brown-press/train.txt" >"$dir/nightly/train.txt"
(cd "$dir" && "$bin" submit spec.yaml "${common[@]}" --wait) >"$dir/submit.log" 2>&1 ||
  { log "the run failed:"; tail -20 "$dir/submit.log" >&2; exit 1; }
ended=$(mib VmRSS)
peak=$(mib VmHWM)
sleep "$settle"
idle=$(mib VmRSS)
printf 'idle after start: %d MiB\npeak: %d MiB\nat the end of the run: %d MiB\nidle %ds after the run: %d MiB\n' "$start" "$peak" "$ended" "$settle" "$idle"
grep -E 'memory returned|returning memory' "$dir/worker.log" >&2 || true
