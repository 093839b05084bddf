#!/usr/bin/env bash
# Measures, with the default worker settings, the time from each fault to
# the run's completion (docs/operations.md): a worker SIGKILLed mid-node, a
# worker SIGSTOPped until its node was re-run elsewhere, then continued,
# Redis stopped 30 s and restarted empty, MinIO stopped 30 s, two identical
# submits at once, an output rotted in a file store, and the API under
# attack (wrong tokens, large requests, a traversal in a download path), a
# scheduler killed right after claiming a tick, a full disk (file store and
# MinIO), and `nerflow serve --model` under 32 clients while another version
# is promoted. It starts its own redis-server and MinIO on the ports RP and
# MP (default 16392, 19392) and two `nerflow worker` processes built with
# the test stages, and takes about ten minutes. ONLY picks sections (kill,
# stop, redis, minio, twice, rotted, attack, scheduler, disk, serve); the
# disk section mounts tmpfs file systems, so it needs root (it is skipped
# otherwise).
#
#   scripts/measure-faults.sh
#   ONLY="scheduler disk serve" scripts/measure-faults.sh
set -u
cd "$(dirname "$0")/.."
W=$(mktemp -d "${TMPDIR:-/tmp}/nerflow-faults.XXXX")
B=$W/nerflow
go build -tags nerflow_teststages -o "$B" ./cmd/nerflow || exit 1
RP=${RP:-16392}; MP=${MP:-19392}
export MINIO_ROOT_USER=measure MINIO_ROOT_PASSWORD=measuresecret MINIO_BROWSER=off
start_redis() { redis-server --bind 127.0.0.1 --port $RP --save '' --appendonly no --daemonize yes --pidfile $W/redis.pid --logfile $W/redis.log; until redis-cli -p $RP ping >/dev/null 2>&1; do sleep 0.05; done; }
stop_redis() { kill -9 $(cat $W/redis.pid); sleep 0.2; }
start_minio() { $HOME/.cache/nerflow/bin/minio server $W/minio --address 127.0.0.1:$MP --quiet > $W/minio.log 2>&1 & echo $! > $W/minio.pid; until curl -fsS http://127.0.0.1:$MP/minio/health/ready >/dev/null 2>&1; do sleep 0.05; done; sleep 1; }
stop_minio() { kill -9 $(cat $W/minio.pid); sleep 0.2; }
export NERFLOW_REDIS_ADDR=127.0.0.1:$RP NERFLOW_STORE="s3://measure?endpoint=127.0.0.1:$MP&secure=false" NERFLOW_S3_ACCESS_KEY=measure NERFLOW_S3_SECRET_KEY=measuresecret NERFLOW_LOG_LEVEL=info
start_redis; start_minio
worker() { $B worker --queues cpu --concurrency 2 > $W/worker-$1.log 2>&1 & echo $!; }
spec() { cat > $W/$1.yaml <<Y
nodes:
  text: {stage: test.emit, params: {text: $1}}
  slow: {stage: test.slow, params: {steps: $2, step_time: 100ms}, inputs: {in: text}}
  after: {stage: test.concat, inputs: {in: text}, params: {suffix: "!"}}
Y
echo $W/$1.yaml; }
progress() { $B status $1 --json 2>/dev/null | python3 -c 'import json,sys; s=json.load(sys.stdin); n=[x for x in s["nodes"] if x["id"]=="slow"][0]; print((n.get("progress") or {}).get("done",0) if n["state"]=="running" else 0)'; }
state() { $B status $1 --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])'; }
wait_progress() { until [ "$(progress $1)" -ge $2 ] 2>/dev/null; do sleep 0.2; done; }
wait_over() { while [ "$(state $1)" = running ] || [ -z "$(state $1)" ]; do sleep 0.3; done; state $1; }
now() { date +%s.%N; }
since() { echo "$(now) - $1" | bc; }
want() { [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $1 "* ]]; }

A=$(worker a); Bw=$(worker b)
if want kill; then
echo "== SIGKILL of the worker running a node (default --node-lease 15s, --reconcile-interval 5s)"
id=$($B submit $(spec kill 150)); wait_progress $id 30
holder=$($B status $id --json | python3 -c 'import json,sys; s=json.load(sys.stdin); print([x for x in s["nodes"] if x["id"]=="slow"][0]["worker"])')
pid=${holder##*:}; pid=${pid%%/*}; kill -9 $pid; t0=$(now)
until $B status $id 2>/dev/null | grep -q "worker lost"; do sleep 0.2; done; echo "lost shown after $(echo "$(now) - $t0" | bc) s"
until grep -q "resuming from checkpoint.*$id" $W/worker-*.log 2>/dev/null; do sleep 0.2; done; echo "re-run started (resumed from its checkpoint) $(echo "$(now) - $t0" | bc) s after the kill"
r=$(wait_over $id); echo "run $r $(echo "$(now) - $t0" | bc) s after the kill (node: 150 steps of 100 ms + a checkpoint each, killed after step 30, resumed from its checkpoint)"
$B status $id | head -3
[ $pid = $A ] && A=$(worker a2) || Bw=$(worker b2)
fi

if want stop; then
echo "== SIGSTOP of the worker running a node until another worker re-ran it, then SIGCONT (the late commit must be fenced off)"
id=$($B submit $(spec stop 150)); wait_progress $id 30
holder=$($B status $id --json | python3 -c 'import json,sys; s=json.load(sys.stdin); print([x for x in s["nodes"] if x["id"]=="slow"][0]["worker"])')
pid=${holder##*:}; pid=${pid%%/*}; kill -STOP $pid; t0=$(now)
r=$(wait_over $id); echo "run $r $(echo "$(now) - $t0" | bc) s after the SIGSTOP"
kill -CONT $pid; t1=$(now)
for _ in $(seq 150); do grep -q "this attempt.s are discarded" $W/worker-*.log 2>/dev/null && break; sleep 0.2; done
echo "the woken worker was fenced off $(echo "$(now) - $t1" | bc) s after SIGCONT:"; grep -h "this attempt's are discarded" $W/worker-*.log | cut -c1-260
$B status $id | head -4
fi

if want redis; then
echo "== Redis stopped 30 s mid-node, restarted empty (default restore delay 10s)"
id=$($B submit $(spec redis 400)); wait_progress $id 30
before=$(cat $W/worker-*.log | grep -c "level=ERROR\|level=WARN")
stop_redis; t0=$(now); sleep 30; after=$(cat $W/worker-*.log | grep -c "level=ERROR\|level=WARN"); start_redis
echo "warnings and errors logged by the $(ls $W/worker-*.log | wc -l) worker logs during the 30 s outage: $((after-before)) (live workers: 2)"
r=$(wait_over $id); echo "run $r $(echo "$(now) - $t0" | bc) s after Redis stopped (node had ~37 s of work left when it stopped)"
grep -h "restored\|waiting for it\|took over\|lost the lease" $W/worker-*.log | cut -c1-220
$B status $id | head -6
fi

if want minio; then
echo "== MinIO stopped for 30 s mid-node"
id=$($B submit $(spec minio 100)); wait_progress $id 30
stop_minio; t0=$(now); sleep 30; start_minio
r=$(wait_over $id); echo "run $r $(echo "$(now) - $t0" | bc) s after MinIO stopped (node had ~7 s of work left)"
$B status $id | head -6
fi

if want twice; then
echo "== two identical submits at once"
s=$(spec twice 50); t0=$(now); $B submit $s > $W/i1 & sp=$!; $B submit $s > $W/i2; wait $sp
for f in $W/i1 $W/i2; do id=$(cat $f); r=$(wait_over $id); echo "run $id $r $(echo "$(now) - $t0" | bc) s after submitting"; $B status $id | sed -n 2,5p; done
fi

if want rotted; then
echo "== an output rotted in the store (embedded mode, file store): a byte of node text's output flipped under its recorded digest"
F=$W/fstore; s=$(spec rotted 5)
NERFLOW_REDIS_ADDR= NERFLOW_STORE=file://$F $B run $s --no-progress > $W/rotted-1.log 2>&1 || tail -5 $W/rotted-1.log
python3 - "$F" <<'PY'
import glob, sys
for p in glob.glob(sys.argv[1] + "/artifacts/*-out/out.txt"):
    b = bytearray(open(p, "rb").read())
    if b[:7] == b"rotted{":  # test.emit's "rotted", its trailer next
        b[0] ^= 0x20; open(p, "wb").write(b); print("flipped a byte of", p[len(sys.argv[1]) + 1:])
PY
NERFLOW_REDIS_ADDR= NERFLOW_STORE=file://$F $B verify | tail -4
t0=$(now); NERFLOW_REDIS_ADDR= NERFLOW_STORE=file://$F $B run $s --no-progress --set after.suffix=? > $W/rotted-2.log 2>&1
echo "run exited $? $(echo "$(now) - $t0" | bc) s after it started (text executed again, after read the new copy):"
grep -h "input damaged\|^text\|^after\|^run " $W/rotted-2.log | cut -c1-220
fi

if want attack; then
echo "== the API under attack: wrong tokens, a large body, a traversal in a download path"
SP=${SP:-18392}; export NERFLOW_SERVE_TOKEN=measure-faults-token-0123456789
$B serve --addr 127.0.0.1:$SP > $W/serve.log 2>&1 & S=$!
until curl -fsS http://127.0.0.1:$SP/healthz >/dev/null 2>&1; do sleep 0.1; done
echo "download of ../../etc/passwd, encoded, as the spec's node: $(curl -s -o /dev/null -w '%{http_code}' --path-as-is -H "Authorization: Bearer $NERFLOW_SERVE_TOKEN" "http://127.0.0.1:$SP/api/v1/runs/$id/nodes/text/outputs/out/files/..%2F..%2F..%2Fetc%2Fpasswd")"
codes=""; for i in $(seq 7); do codes="$codes $(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer wrong-$i" http://127.0.0.1:$SP/api/v1/runs)"; done
echo "7 wrong tokens in a row from one address:$codes; then the right one: $(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $NERFLOW_SERVE_TOKEN" http://127.0.0.1:$SP/api/v1/runs) (Retry-After: $(curl -s -D - -o /dev/null -H "Authorization: Bearer $NERFLOW_SERVE_TOKEN" http://127.0.0.1:$SP/api/v1/runs | tr -d '\r' | sed -n 's/^Retry-After: //p') s)"
head -c 2097152 /dev/zero > $W/big.body
echo "a 2 MiB body to GET /healthz: $(curl -s -o /dev/null -w '%{http_code}' -X GET --data-binary @$W/big.body http://127.0.0.1:$SP/healthz); a 100 KiB header: $(curl -s -o /dev/null -w '%{http_code}' -H "X-Pad: $(head -c 102400 /dev/zero | tr '\0' x)" http://127.0.0.1:$SP/healthz)"
kill $S
fi


if want scheduler; then
echo "== a nerflow scheduler killed right after claiming a tick, another one running (default claim lease 15 s, poll 1 s)"
mkdir -p $W/sched/data; echo tick > $W/sched/data/out.txt
# A large file in the spec's dataset: firing the tick hashes and uploads it,
# so that the claim is held long enough to kill its holder before it records
# the tick.
head -c 134217728 /dev/urandom > $W/sched/data/big.bin
printf 'name: measure-sched\nnodes:\n  cat: {stage: test.concat, inputs: {in: ./data}}\n' > $W/sched/spec.yaml
$B scheduler > $W/sched-a.log 2>&1 & SA=$!
$B scheduler > $W/sched-b.log 2>&1 & SB=$!
sleep 1
# Every 40 s: the next tick comes well after the takeover.
$B schedule add measure --cron '@every 40s' $W/sched/spec.yaml > /dev/null
kill -STOP $SB  # so that the tick is A's to claim
until redis-cli -p $RP --scan --pattern '*:schedules:tick:measure:*' | grep -q .; do sleep 0.02; done
kill -9 $SA; t0=$(now); kill -CONT $SB
echo "scheduler $SA claimed the tick and was SIGKILLed; scheduler $SB goes on"
until [ "$($B schedule history measure --json 2>/dev/null | python3 -c 'import json,sys; print(len(json.load(sys.stdin) or []))' 2>/dev/null)" -ge 1 ] 2>/dev/null; do sleep 0.2; done
echo "the tick was recorded $(since $t0) s after the kill:"
$B schedule history measure | cut -c1-200
id=$($B schedule history measure --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["run"])')
[ -n "$id" ] && echo "its run $(wait_over $id) $(since $t0) s after the kill"
$B schedule rm measure > /dev/null; kill $SB; wait $SB 2>/dev/null
fi

if want disk; then
if [ "$(id -u)" != 0 ]; then echo "== full disk: skipped (mounting a tmpfs needs root)"; else
echo "== the file store's disk full (embedded mode, a 1 MiB tmpfs, a node writing 2 MiB, default retries), then grown to 8 MiB"
D=$W/fullstore; mkdir -p $D; mount -t tmpfs -o size=1m tmpfs $D
printf 'nodes:\n  a: {stage: test.emit, params: {text: small}}\n  b: {stage: test.fill, params: {size: 2097152}, inputs: {in: a}}\n' > $W/full.yaml
t0=$(now); NERFLOW_REDIS_ADDR= NERFLOW_STORE=file://$D $B run $W/full.yaml --no-progress > $W/full-1.log 2>&1
echo "run exited $? after $(since $t0) s; its error:"; grep -ho "no space left on [^\"]*" $W/full-1.log | head -1 | cut -c1-240
pfx=$(grep -ho "while writing artifacts/[^/]*" $W/full-1.log | head -1 | sed 's/while writing //')
echo "left in the store under b's output prefix $pfx: $(find $D -path "$D/$pfx*" -type f | wc -l) files; node records: $(find $D -path "$D/nodes/*" -type f | wc -l) (a's)"
mount -o remount,size=8m $D; t0=$(now)
NERFLOW_REDIS_ADDR= NERFLOW_STORE=file://$D $B run $W/full.yaml --no-progress > $W/full-2.log 2>&1
echo "space freed; the same command exited $? $(since $t0) s later:"; grep -h "^cached\|^done\|^failed" $W/full-2.log | cut -c1-120
umount $D

echo "== MinIO's disk full (a 48 MiB tmpfs, a node writing 64 MiB, default retries), then grown to 256 MiB"
M=$W/fullminio; mkdir -p $M; mount -t tmpfs -o size=48m tmpfs $M
FP=$((MP + 1))
$HOME/.cache/nerflow/bin/minio server $M/data --address 127.0.0.1:$FP --quiet > $W/fullminio.log 2>&1 & FM=$!
until curl -fsS http://127.0.0.1:$FP/minio/health/ready >/dev/null 2>&1; do sleep 0.05; done
FS="s3://full?endpoint=127.0.0.1:$FP&secure=false"
printf 'nodes:\n  a: {stage: test.emit, params: {text: small}}\n  b: {stage: test.fill, params: {size: 67108864}, inputs: {in: a}}\n' > $W/fullm.yaml
t0=$(now); NERFLOW_REDIS_ADDR= NERFLOW_STORE=$FS $B run $W/fullm.yaml --no-progress > $W/fullm-1.log 2>&1
echo "run exited $? after $(since $t0) s; its error:"; grep -ho "no space left on [^\"]*" $W/fullm-1.log | head -1 | cut -c1-240
mount -o remount,size=256m $M; t0=$(now); tries=0
until NERFLOW_REDIS_ADDR= NERFLOW_STORE=$FS $B run $W/fullm.yaml --no-progress > $W/fullm-2.log 2>&1; do tries=$((tries + 1)); [ $tries -ge 30 ] && break; sleep 1; done
echo "space freed; the same command succeeded $(since $t0) s later, after $tries failed tries (MinIO rereads its free space after a while):"; grep -h "^cached\|^done\|^failed" $W/fullm-2.log | cut -c1-120
kill $FM; wait $FM 2>/dev/null; umount $M
fi
fi

if want serve; then
echo "== nerflow serve --model tiny (embedded, default settings) under 32 clients for 30 s; tiny@2 promoted to production after 15 s"
SD=$W/serve; mkdir -p $SD; cp -r server/testdata/tiny $SD/
cat > $SD/tiny.yaml <<'Y'
name: tiny
nodes:
  train:
    stage: train.tagger
    fan_out: {seed: [1, 2]}
    params: {head: crf, loss: crf, scheme: bio, epochs: 20, batch_size: 4, learning_rate: 0.02, hidden: 16,
      char_dim: 8, char_filters: 12, casing_dim: 4, word_dim: 16, min_word_count: 1,
      corpus_file: train_text.txt, corpus_labels: train_label.txt}
    inputs: {corpus: ./tiny}
  register:
    stage: registry.register
    fan_out: {seed: [1, 2]}
    inputs: {model: train.model}
Y
export NERFLOW_SERVE_TOKEN=measure-faults-token-0123456789
SS=file://$SD/store; LP=${LP:-18393}
NERFLOW_REDIS_ADDR= NERFLOW_STORE=$SS $B run $SD/tiny.yaml --no-progress > $W/serve-train.log 2>&1 || tail -5 $W/serve-train.log
NERFLOW_REDIS_ADDR= NERFLOW_STORE=$SS $B models promote tiny@1 --tag production
serve_tiny() { NERFLOW_REDIS_ADDR= NERFLOW_STORE=$SS $B serve --addr 127.0.0.1:$LP --model tiny --workers 0 "$@" > $W/serve-load.log 2>&1 & S=$!
  until curl -fsS http://127.0.0.1:$LP/healthz >/dev/null 2>&1; do sleep 0.1; done; }
serve_tiny
$B bench-serve --url http://127.0.0.1:$LP --clients 32 --duration 30s --promote tiny@2; echo "bench-serve exited $?"
grep -h "model loaded" $W/serve-load.log | cut -c1-200
kill $S; wait $S 2>/dev/null
echo "== the same server with --max-queue 4, 32 clients for 10 s: the overload is refused with 503 and Retry-After"
serve_tiny --max-queue 4
$B bench-serve --url http://127.0.0.1:$LP --clients 32 --duration 10s; echo "bench-serve exited $?"
kill $S; wait $S 2>/dev/null
fi
kill $A $Bw 2>/dev/null; stop_redis; stop_minio; echo done
