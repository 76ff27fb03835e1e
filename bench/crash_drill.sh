#!/usr/bin/env bash
# Crash drill: one campaign on CPU workers while workers, the coordinator and Redis are killed
# (SIGKILL) and restarted at random; then every planned job must have exactly one result row,
# none changed by the restarts. A benchmark of recovery, not a test (ctest runs a short form).
#   bench/crash_drill.sh [BUILD_DIR] [CAMPAIGN]     (default: examples/campaigns/softmax_cpu.json)
# Environment: AK_DRILL_WORKERS (3), AK_DRILL_SECONDS (how long kills go on; 120), AK_DRILL_PERIOD_MS
# (between kills; 1500), AK_DRILL_COPIES (the campaign is submitted this many times under
# different names; 4), AK_DRILL_PORT (first of two loopback ports; 27555), AK_DRILL_SEED (42).
# Prints one summary line and writes $OUT/drill/{summary.txt,results.tsv,events.log}.
set -uo pipefail
# Arguments are relative to the directory it is called from; then it works from the repository.
BUILD=$(realpath -m "${1:-$(dirname "$0")/../build}")
CAMPAIGN=$(realpath -m "${2:-$(dirname "$0")/../examples/campaigns/softmax_cpu.json}")
cd "$(dirname "$0")/.."
AK=$BUILD/bin/autokernel
[ -x "$AK" ] || { echo "crash_drill: no autokernel under $BUILD/bin" >&2; exit 2; }
command -v redis-server >/dev/null || { echo "crash_drill: redis-server not found" >&2; exit 2; }
WORKERS=${AK_DRILL_WORKERS:-3}
SECONDS_OF_KILLS=${AK_DRILL_SECONDS:-120}
PERIOD_MS=${AK_DRILL_PERIOD_MS:-1500}
COPIES=${AK_DRILL_COPIES:-4}
PORT=${AK_DRILL_PORT:-27555}
RANDOM=${AK_DRILL_SEED:-42}
OUT=${OUT:-$PWD/bench-out}/drill
mkdir -p "$OUT"
rm -f "$OUT"/{summary.txt,results.tsv,results.json,events.log}
WORK=$(mktemp -d /tmp/ak-drill-XXXXXX)
SOCK=$WORK/redis.sock
W_EP=tcp://127.0.0.1:$PORT
C_EP=tcp://127.0.0.1:$((PORT + 1))
CLIENT=(--client "$C_EP" --timeout-ms 5000)
declare -A wpid
redis_pid=""
coord_pid=""
log() { echo "$(date -u +%H:%M:%S.%N | cut -c1-12) $*" >> "$OUT/events.log"; }

start_redis() {
  # Durable: appendfsync always, so a SIGKILL loses nothing the coordinator was told was written.
  redis-server --port 0 --unixsocket "$SOCK" --unixsocketperm 700 --dir "$WORK" --appendonly yes \
    --appendfsync always --save "" --daemonize no > "$WORK/redis.log" 2>&1 &
  redis_pid=$!
  for _ in $(seq 100); do [ -S "$SOCK" ] && redis-cli -s "$SOCK" ping >/dev/null 2>&1 && return 0; sleep 0.05; done
  echo "crash_drill: redis did not start" >&2; return 1
}
start_coordinator() {
  "$AK" --log-level warn coordinator --redis "unix://$SOCK" --workers-bind "$W_EP" --clients-bind "$C_EP" \
    --metrics "" --lease-ms 3000 --worker-timeout-ms 4000 >> "$WORK/coordinator.log" 2>&1 &
  coord_pid=$!
}
start_worker() {  # the same id after a restart: the drill checks that a successor takes over at once
  "$AK" --log-level warn worker --backend cpu --id "drill-w$1" --slots 2 --coordinator "$W_EP" \
    --cache-dir "$WORK/cache" --state-dir "$WORK/worker-$1" >> "$WORK/worker-$1.log" 2>&1 &
  wpid[$1]=$!
}
cleanup() {
  for p in "${wpid[@]}" $coord_pid $redis_pid; do kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

start_redis || exit 1
start_coordinator
for i in $(seq "$WORKERS"); do start_worker "$i"; done
# Each copy is a campaign of its own (a new name, so a new id).
ids=()
for c in $(seq "$COPIES"); do
  python3 - "$CAMPAIGN" "$WORK/campaign-$c.json" "$c" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
doc["name"] = f"{doc.get('name', 'drill')}-drill{sys.argv[3]}"
json.dump(doc, open(sys.argv[2], "w"))
PY
  for _ in $(seq 50); do
    out=$("$AK" --log-level warn submit "$WORK/campaign-$c.json" "${CLIENT[@]}" 2>&1) && break
    sleep 0.2
  done
  id=$(grep -o 'campaign [0-9a-f]\{16\}' <<< "$out" | head -1 | cut -d' ' -f2)
  [ -n "$id" ] || { echo "crash_drill: submit failed: $out" >&2; exit 1; }
  ids+=("$id")
  log "submitted $id"
done
planned=$("$AK" --log-level warn status --json "${CLIENT[@]}" | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(sum(c.get("total", 0) for c in d.get("campaigns", [])))')

kills_worker=0 kills_coord=0 kills_redis=0
t_end=$(( $(date +%s) + SECONDS_OF_KILLS ))
while [ "$(date +%s)" -lt "$t_end" ]; do
  sleep "$(awk -v ms="$PERIOD_MS" 'BEGIN {printf "%.3f", ms / 1000}')"
  # The first three kills are one of each kind, so that even a short drill kills all three.
  n=$((kills_worker + kills_coord + kills_redis))
  case $n in 0) r=0 ;; 1) r=7 ;; 2) r=9 ;; *) r=$((RANDOM % 10)) ;; esac
  if [ "$r" -lt 7 ]; then
    i=$(( RANDOM % WORKERS + 1 ))
    kill -9 "${wpid[$i]}" 2>/dev/null; wait "${wpid[$i]}" 2>/dev/null
    kills_worker=$((kills_worker + 1)); log "kill worker $i"
    start_worker "$i"
  elif [ "$r" -lt 9 ]; then
    kill -9 "$coord_pid" 2>/dev/null; wait "$coord_pid" 2>/dev/null
    kills_coord=$((kills_coord + 1)); log "kill coordinator"
    start_coordinator
  else
    kill -9 "$redis_pid" 2>/dev/null; wait "$redis_pid" 2>/dev/null
    kills_redis=$((kills_redis + 1)); log "kill redis"
    start_redis || exit 1
  fi
done
log "kills over; waiting for the campaigns"
# Then no more kills: wait until every campaign has finished (bounded).
for _ in $(seq 1200); do
  left=$("$AK" --log-level warn status --json "${CLIENT[@]}" 2>/dev/null | python3 -c '
import json, sys
try:
    d = json.load(sys.stdin)
except Exception:
    print(-1); sys.exit()
print(sum(1 for c in d.get("campaigns", []) if not c.get("complete")))') || left=-1
  [ "$left" = 0 ] && break
  sleep 0.5
done
"$AK" --log-level warn export --tsv "$OUT/results.tsv" --json "$OUT/results.json" "${CLIENT[@]}" > /dev/null || {
  echo "crash_drill: export failed" >&2; exit 1; }
python3 - "$OUT/results.tsv" "$planned" "$kills_worker" "$kills_coord" "$kills_redis" "$left" > "$OUT/summary.txt" <<'PY'
import collections, csv, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
planned, kw, kc, kr, left = (int(x) for x in sys.argv[2:7])
per_job = collections.Counter(r["job_id"] for r in rows)
dups = sum(n - 1 for n in per_job.values() if n > 1)
status = collections.Counter(r["correctness"] for r in rows)
print(f"kills: {kw} worker, {kc} coordinator, {kr} redis; jobs planned {planned}, rows {len(rows)}, "
      f"distinct jobs {len(per_job)}, duplicates {dups}, missing {planned - len(per_job)}, "
      f"unfinished campaigns {left}; by status: " + ", ".join(f"{k} {v}" for k, v in sorted(status.items())))
ok = dups == 0 and len(per_job) == planned and left == 0
print("drill: " + ("every planned job has exactly one row" if ok else "FAILED"))
sys.exit(0 if ok else 1)
PY
rc=$?
cat "$OUT/summary.txt"
exit $rc
