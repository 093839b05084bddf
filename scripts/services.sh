#!/usr/bin/env bash
# Starts (or stops) the real Redis and MinIO servers that nerflow's tests talk
# to, on 127.0.0.1, with their data under a throw-away directory.
#
#   eval "$(scripts/services.sh start)"   # exports NERFLOW_TEST_* for go test
#   scripts/services.sh stop
#
# Ports: NERFLOW_TEST_REDIS_PORT (default 6390), NERFLOW_TEST_MINIO_PORT (9390).
set -euo pipefail

cache=${NERFLOW_CACHE:-$HOME/.cache/nerflow}
redis_port=${NERFLOW_TEST_REDIS_PORT:-6390}
minio_port=${NERFLOW_TEST_MINIO_PORT:-9390}
state=${NERFLOW_SERVICES_DIR:-${TMPDIR:-/tmp}/nerflow-test-services-$redis_port-$minio_port}
minio=${NERFLOW_MINIO_BIN:-$cache/bin/minio}
key=nerflowtest
secret=nerflowtestsecret

log() { printf '[services] %s\n' "$*" >&2; }

stop() {
  if [[ -f $state/minio.pid ]]; then kill "$(cat "$state/minio.pid")" 2>/dev/null || true; fi
  redis-cli -p "$redis_port" shutdown nosave >/dev/null 2>&1 || true
  rm -rf "$state"
}

healthy() {
  redis-cli -p "$redis_port" ping >/dev/null 2>&1 && curl -fsS "http://127.0.0.1:$minio_port/minio/health/ready" >/dev/null 2>&1
}

print_env() {
  cat <<ENV
export NERFLOW_TEST_REDIS_ADDR=127.0.0.1:$redis_port
export NERFLOW_TEST_S3_ENDPOINT=127.0.0.1:$minio_port
export NERFLOW_TEST_S3_ACCESS_KEY=$key
export NERFLOW_TEST_S3_SECRET_KEY=$secret
ENV
}

start() {
  # Already running (another shell of the same developer): share them.
  if [[ -f $state/minio.pid ]] && healthy; then print_env; return 0; fi
  stop
  mkdir -p "$state/minio"
  command -v redis-server >/dev/null || { log "redis-server not installed: run scripts/setup.sh"; exit 1; }
  [[ -x $minio ]] || { log "MinIO binary $minio missing: run scripts/setup.sh"; exit 1; }
  redis-server --bind 127.0.0.1 --port "$redis_port" --save '' --appendonly no --daemonize yes \
    --pidfile "$state/redis.pid" --logfile "$state/redis.log" >/dev/null
  MINIO_ROOT_USER=$key MINIO_ROOT_PASSWORD=$secret MINIO_BROWSER=off \
    nohup "$minio" server "$state/minio" --address "127.0.0.1:$minio_port" --quiet >"$state/minio.log" 2>&1 &
  echo $! > "$state/minio.pid"
  for _ in $(seq 1 100); do
    if healthy; then
      log "redis on 127.0.0.1:$redis_port, minio on 127.0.0.1:$minio_port"
      print_env
      return 0
    fi
    sleep 0.1
  done
  log "services did not become ready; logs:"; tail -5 "$state"/*.log >&2; exit 1
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
