#!/usr/bin/env bash
# Measures, with the default worker settings, the time from each fault to
# the run's completion (docs/operations.md): a worker SIGKILLed mid-node, a
# worker SIGSTOPped until its node was re-run elsewhere, then continued,
# Redis stopped 30 s and restarted empty, MinIO stopped 30 s, two identical
# submits at once, an output rotted in a file store, and the API under
# attack (wrong tokens, large requests, a traversal in a download path). It starts its own redis-server and MinIO on the ports
# RP and MP (default 16392, 19392) and two `nerflow worker` processes built
# with the test stages, and takes about five minutes.
#
#   scripts/measure-faults.sh
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

A=$(worker a); Bw=$(worker b)
echo "== SIGKILL of the worker running a node (default --node-lease 15s, --reconcile-interval 5s)"
id=$($B submit $(spec kill 150)); wait_progress $id 30
holder=$($B status $id --json | python3 -c 'import json,sys; s=json.load(sys.stdin); print([x for x in s["nodes"] if x["id"]=="slow"][0]["worker"])')
pid=${holder##*:}; pid=${pid%%/*}; kill -9 $pid; t0=$(now)
until $B status $id 2>/dev/null | grep -q "worker lost"; do sleep 0.2; done; echo "lost shown after $(echo "$(now) - $t0" | bc) s"
until grep -q "resuming from checkpoint.*$id" $W/worker-*.log 2>/dev/null; do sleep 0.2; done; echo "re-run started (resumed from its checkpoint) $(echo "$(now) - $t0" | bc) s after the kill"
r=$(wait_over $id); echo "run $r $(echo "$(now) - $t0" | bc) s after the kill (node: 150 steps of 100 ms + a checkpoint each, killed after step 30, resumed from its checkpoint)"
$B status $id | head -3
[ $pid = $A ] && A=$(worker a2) || Bw=$(worker b2)

echo "== SIGSTOP of the worker running a node until another worker re-ran it, then SIGCONT (the late commit must be fenced off)"
id=$($B submit $(spec stop 150)); wait_progress $id 30
holder=$($B status $id --json | python3 -c 'import json,sys; s=json.load(sys.stdin); print([x for x in s["nodes"] if x["id"]=="slow"][0]["worker"])')
pid=${holder##*:}; pid=${pid%%/*}; kill -STOP $pid; t0=$(now)
r=$(wait_over $id); echo "run $r $(echo "$(now) - $t0" | bc) s after the SIGSTOP"
kill -CONT $pid; t1=$(now)
for _ in $(seq 150); do grep -q "this attempt.s are discarded" $W/worker-*.log 2>/dev/null && break; sleep 0.2; done
echo "the woken worker was fenced off $(echo "$(now) - $t1" | bc) s after SIGCONT:"; grep -h "this attempt's are discarded" $W/worker-*.log | cut -c1-260
$B status $id | head -4

echo "== Redis stopped 30 s mid-node, restarted empty (default restore delay 10s)"
id=$($B submit $(spec redis 400)); wait_progress $id 30
before=$(cat $W/worker-*.log | grep -c "level=ERROR\|level=WARN")
stop_redis; t0=$(now); sleep 30; after=$(cat $W/worker-*.log | grep -c "level=ERROR\|level=WARN"); start_redis
echo "warnings and errors logged by the $(ls $W/worker-*.log | wc -l) worker logs during the 30 s outage: $((after-before)) (live workers: 2)"
r=$(wait_over $id); echo "run $r $(echo "$(now) - $t0" | bc) s after Redis stopped (node had ~37 s of work left when it stopped)"
grep -h "restored\|waiting for it\|took over\|lost the lease" $W/worker-*.log | cut -c1-220
$B status $id | head -6

echo "== MinIO stopped for 30 s mid-node"
id=$($B submit $(spec minio 100)); wait_progress $id 30
stop_minio; t0=$(now); sleep 30; start_minio
r=$(wait_over $id); echo "run $r $(echo "$(now) - $t0" | bc) s after MinIO stopped (node had ~7 s of work left)"
$B status $id | head -6

echo "== two identical submits at once"
s=$(spec twice 50); t0=$(now); $B submit $s > $W/i1 & sp=$!; $B submit $s > $W/i2; wait $sp
for f in $W/i1 $W/i2; do id=$(cat $f); r=$(wait_over $id); echo "run $id $r $(echo "$(now) - $t0" | bc) s after submitting"; $B status $id | sed -n 2,5p; done

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
kill $A $Bw 2>/dev/null; stop_redis; stop_minio; echo done
