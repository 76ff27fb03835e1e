#!/usr/bin/env bash
# The multi-host test (issue 21, item 4): the farm's own processes on separate hosts, made of
# network namespaces on one machine. Redis, the coordinator, four CPU workers, a client and a rogue
# each have a namespace and an address on one bridge (in a namespace of its own), CURVE on:
#
#   10.77.0.2 redis   10.77.0.3 coordinator   10.77.0.11-14 workers w1-w4   10.77.0.20 client
#   10.77.0.30 rogue (a worker and a client with a key in no allow list)
#
# Mid-campaign a partition cuts w1 and w2 off (their links on the bridge go down) while each holds
# leases; their leases expire, their jobs are requeued and run on w3 and w4; then the links come
# back, w1 and w2 register again and the campaign ends. Checks: one row per job (none missing,
# none twice), every row PASS, at least one requeue, every requeued job's row from a worker that
# was not cut off, the rogue worker leased nothing and is not registered, the rogue client refused.
# Prints the figures (jobs, partitions, requeues, rows per job, refused peers).
#   tests/integration/multihost_test.sh BUILD_DIR CAMPAIGN
# Exits 77 (CTest's skip) where namespaces cannot be made (not root, no iproute2).
set -uo pipefail
BUILD=$(realpath -m "${1:?build dir}")
CAMPAIGN=$(realpath -m "${2:?campaign file}")
AK=$BUILD/bin/autokernel
SKIP=77
[ -x "$AK" ] || { echo "multihost: no autokernel under $BUILD/bin" >&2; exit 2; }
command -v redis-server >/dev/null || { echo "multihost: redis-server not found" >&2; exit 2; }
command -v ip >/dev/null || { echo "multihost: skipped: no ip (iproute2)"; exit $SKIP; }

# Names unique to this run, so that runs side by side do not meet; every interface lives in a
# namespace of this run, so the interface names inside may repeat.
TAG=akmh$$
HUB=$TAG-hub
NODES=(redis coord w1 w2 w3 w4 cli rogue)
declare -A ADDR=([redis]=10.77.0.2 [coord]=10.77.0.3 [w1]=10.77.0.11 [w2]=10.77.0.12 [w3]=10.77.0.13
                 [w4]=10.77.0.14 [cli]=10.77.0.20 [rogue]=10.77.0.30)
WORK=$(mktemp -d /tmp/ak-multihost-XXXXXX)
declare -a PIDS=()
made_ns=()

cleanup() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
  # and whatever else still runs in the nodes' namespaces
  for ns in "${made_ns[@]}"; do ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null; done
  wait 2>/dev/null
  for ns in "${made_ns[@]}"; do ip netns del "$ns" 2>/dev/null; done
  if [ "${KEEP:-0}" = 1 ]; then echo "multihost: logs kept in $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if ! ip netns add "$HUB" 2>"$WORK/netns.err"; then
  echo "multihost: skipped: cannot create a network namespace ($(cat "$WORK/netns.err")); run as root"
  exit $SKIP
fi
made_ns+=("$HUB")
fail() {
  echo "multihost: FAILED: $*" >&2
  for f in "$WORK"/*.log; do echo "--- $f (last lines)" >&2; tail -n 15 "$f" >&2; done
  exit 1
}
ip -n "$HUB" link add br0 type bridge || fail "no bridge"
ip -n "$HUB" link set br0 up
for n in "${NODES[@]}"; do
  ns=$TAG-$n
  ip netns add "$ns" || fail "netns $ns"
  made_ns+=("$ns")
  # One veth pair per host: 'eth0' in the host's namespace, '<node>' on the hub's bridge.
  ip -n "$HUB" link add "$n" type veth peer name eth0 netns "$ns" || fail "veth $n"
  ip -n "$HUB" link set "$n" master br0 up
  ip -n "$ns" addr add "${ADDR[$n]}/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
done
on() { local n=$1; shift; ip netns exec "$TAG-$n" "$@"; }
# For `on_bg NODE cmd... &`: the background subshell becomes the process (exec), so $! is its PID
# and cleanup's kill reaches it, not only a subshell (which left the farm running after the test).
on_bg() { local n=$1; shift; exec ip netns exec "$TAG-$n" "$@"; }

# Keys: the coordinator's, one for the workers, an admin client and a rogue in no list.
mkdir -p "$WORK/keys"
for k in coordinator worker admin rogue; do
  "$AK" keys generate "$k" --dir "$WORK/keys" > /dev/null || fail "keys generate $k"
done
K=$WORK/keys
pub() { grep -v '^#' "$K/$1.pub" | head -1 | awk '{print $1}'; }
pub worker > "$K/workers.allow"
echo "$(pub admin) admin" > "$K/clients.allow"

# Redis on its own host; only the coordinator talks to it.
mkdir -p "$WORK/redis"
on_bg redis redis-server --bind "${ADDR[redis]}" --port 6379 --protected-mode no --dir "$WORK/redis" \
  --appendonly yes --appendfsync always --save "" --daemonize no > "$WORK/redis.log" 2>&1 &
PIDS+=($!)
deadline=$((SECONDS + 20))
until on coord redis-cli -h "${ADDR[redis]}" ping 2>/dev/null | grep -q PONG; do
  [ $SECONDS -lt $deadline ] || fail "redis did not answer from the coordinator's host"
  sleep 0.1
done

W_EP=tcp://${ADDR[coord]}:5555
C_EP=tcp://${ADDR[coord]}:5556
METRICS=${ADDR[coord]}:9464
on_bg coord "$AK" --log-level info coordinator --redis "redis://${ADDR[redis]}:6379" --workers-bind "$W_EP" \
  --clients-bind "$C_EP" --metrics "$METRICS" --curve-secret "$K/coordinator.key" \
  --allow-workers "$K/workers.allow" --allow-clients "$K/clients.allow" \
  --lease-ms 2000 --worker-timeout-ms 3000 --max-attempts 5 > "$WORK/coordinator.out" 2> "$WORK/coordinator.log" &
PIDS+=($!)
deadline=$((SECONDS + 30))
until grep -q '^READY ' "$WORK/coordinator.out"; do
  [ $SECONDS -lt $deadline ] || fail "the coordinator did not print READY"
  kill -0 "${PIDS[-1]}" 2>/dev/null || fail "the coordinator exited"
  sleep 0.1
done

ADMIN=(--client "$C_EP" --timeout-ms 5000 --key "$K/admin.key" --coordinator-key "$K/coordinator.pub")
ak_cli() { on cli "$AK" --log-level warn "$@" "${ADMIN[@]}"; }
metric() {  # metric NAME [LABELS]: its value on the coordinator's /metrics, scraped from the client's host
  on cli python3 - "http://$METRICS/metrics" "$1" "${2:-}" <<'PY'
import sys, urllib.request
text = urllib.request.urlopen(sys.argv[1], timeout=5).read().decode()
name, labels = sys.argv[2], sys.argv[3]
total = 0.0
for line in text.splitlines():
    if line.startswith(name) and (not labels or labels in line) and line[len(name)] in " {":
        total += float(line.rsplit(" ", 1)[1])
print(int(total))
PY
}
status_json() { ak_cli status --json 2> /dev/null; }
# leased_of ID: the leases the coordinator holds for worker ID (-1 when it is not registered).
leased_of() {
  status_json | python3 -c '
import json, sys
try:
    d = json.load(sys.stdin)
except Exception:
    print(-2); sys.exit()
print(next((len(w["leased"]) for w in d.get("workers", []) if w["worker_id"] == sys.argv[1]), -1))' "$1"
}
registered() { [ "$(leased_of "$1")" -ge 0 ]; }

start_worker() {  # start_worker NODE ID KEYNAME
  on_bg "$1" "$AK" --log-level info worker --backend cpu --id "$2" --slots 2 --heartbeat-ms 200 \
    --coordinator "$W_EP" --key "$K/$3.key" --coordinator-key "$K/coordinator.pub" \
    --cache-dir "$WORK/cache" --state-dir "$WORK/state-$1" > /dev/null 2> "$WORK/worker-$1.log" &
  PIDS+=($!)
}

# The rogue first: a real worker process whose key is in no list, and a client likewise.
start_worker rogue rogue-worker rogue
rogue_client_out=$(on rogue "$AK" --log-level warn status --client "$C_EP" --timeout-ms 3000 \
  --key "$K/rogue.key" --coordinator-key "$K/coordinator.pub" 2>&1)
rogue_client_rc=$?
[ "$rogue_client_rc" -ne 0 ] || fail "the rogue client was answered: $rogue_client_out"
deadline=$((SECONDS + 30))
until [ "$(metric autokernel_peer_refusals_total 'reason="unknown_key"')" -ge 2 ]; do
  [ $SECONDS -lt $deadline ] || fail "the coordinator did not count two refused handshakes"
  sleep 0.2
done

for w in w1 w2 w3 w4; do start_worker "$w" "mh-$w" worker; done
deadline=$((SECONDS + 60))
for w in w1 w2 w3 w4; do
  until registered "mh-$w"; do
    [ $SECONDS -lt $deadline ] || fail "worker mh-$w did not register"
    sleep 0.2
  done
done

out=$(ak_cli submit "$CAMPAIGN" 2>&1) || fail "submit: $out"
cid=$(grep -o 'campaign [0-9a-f]\{16\}' <<< "$out" | head -1 | cut -d' ' -f2)
[ -n "$cid" ] || fail "submit printed no campaign id: $out"
planned=$(status_json | python3 -c 'import json, sys; print(sum(c["total"] for c in json.load(sys.stdin)["campaigns"]))')

# The partition: once w1 and w2 each hold leases, their links go down.
deadline=$((SECONDS + 60))
until [ "$(leased_of mh-w1)" -gt 0 ] && [ "$(leased_of mh-w2)" -gt 0 ]; do
  [ $SECONDS -lt $deadline ] || fail "w1 and w2 never held leases at once"
  sleep 0.05
done
requeued_before=$(metric autokernel_jobs_requeued_total)
ip -n "$HUB" link set w1 down
ip -n "$HUB" link set w2 down
t_cut=$SECONDS
partitions=1
# cut_ids: every job leased to w1 or w2 while they are cut off (the coordinator may lease them more
# until it forgets them), from STATUS polled until it has forgotten both.
touch "$WORK/cut_ids"
deadline=$((SECONDS + 30))
while :; do
  status_json > "$WORK/status.json"
  python3 - "$WORK/status.json" "$WORK/cut_ids" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception:
    sys.exit()
ids = set(open(sys.argv[2]).read().split())
for w in d.get("workers", []):
    if w["worker_id"] in ("mh-w1", "mh-w2"):
        ids.update(w["leased"])
open(sys.argv[2], "w").write("\n".join(sorted(ids)) + "\n")
PY
  registered mh-w1 || registered mh-w2 || break
  [ $SECONDS -lt $deadline ] || fail "the coordinator still lists w1 or w2 30 s after the partition"
  sleep 0.2
done
held_at_cut=$(grep -c . "$WORK/cut_ids")
[ "$(metric autokernel_jobs_requeued_total)" -gt "$requeued_before" ] || fail "no lease of w1 or w2 was requeued"
requeued_in_partition=$(( $(metric autokernel_jobs_requeued_total) - requeued_before ))
# Their jobs run elsewhere while w1 and w2 are still cut off: each is leased to w3 or w4, or done.
elsewhere() {
  status_json > "$WORK/status.json"
  ak_cli export --tsv "$WORK/mid.tsv" --json "" > /dev/null 2>&1 || return 1
  python3 - "$WORK/status.json" "$WORK/mid.tsv" "$WORK/cut_ids" <<'PY'
import csv, json, sys
d = json.load(open(sys.argv[1]))
leased = {j for w in d.get("workers", []) if w["worker_id"] in ("mh-w3", "mh-w4") for j in w["leased"]}
done = {r["job_id"] for r in csv.DictReader(open(sys.argv[2]), delimiter="\t")}
sys.exit(0 if set(open(sys.argv[3]).read().split()) <= leased | done else 1)
PY
}
deadline=$((SECONDS + 60))
until elsewhere; do
  [ $SECONDS -lt $deadline ] || fail "the jobs of w1 and w2 were not taken by w3 or w4 within 60 s"
  sleep 0.2
done
ip -n "$HUB" link set w1 up
ip -n "$HUB" link set w2 up
partition_s=$((SECONDS - t_cut))

# The link is back: both workers register again, and the campaign ends.
deadline=$((SECONDS + 60))
until registered mh-w1 && registered mh-w2; do
  [ $SECONDS -lt $deadline ] || fail "w1 and w2 did not register again within 60 s of the link's return"
  sleep 0.2
done
deadline=$((SECONDS + 120))
until status_json | python3 -c 'import json, sys; sys.exit(0 if all(c["complete"] for c in json.load(sys.stdin)["campaigns"]) else 1)' 2>/dev/null; do
  [ $SECONDS -lt $deadline ] || fail "the campaign did not end within 120 s"
  sleep 0.3
done
ak_cli export --tsv "$WORK/results.tsv" --json "" > /dev/null || fail "export"
requeued=$(metric autokernel_jobs_requeued_total)
refused=$(metric autokernel_peer_refusals_total 'reason="unknown_key"')
rogue_registered=$(leased_of rogue-worker)

python3 - "$WORK/results.tsv" "$WORK/cut_ids" "$planned" "$partitions" "$held_at_cut" "$requeued_in_partition" "$requeued" \
  "$refused" "$rogue_registered" "$rogue_client_rc" "$partition_s" <<'PY'
import collections, csv, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
cut_ids = set(open(sys.argv[2]).read().split())
planned, partitions, held, req_part, requeued, refused, rogue_leased, rogue_rc, part_s = (int(x) for x in sys.argv[3:12])
per_job = collections.Counter(r["job_id"] for r in rows)
dups = sum(n - 1 for n in per_job.values() if n > 1)
by_status = collections.Counter(r["correctness"] for r in rows)
by_worker = collections.Counter(r["worker"] for r in rows)
later = [r for r in rows if int(r["attempt"]) > 1]
cut_rows = [r for r in rows if r["job_id"] in cut_ids]
cut_elsewhere = [r for r in cut_rows if r["worker"] not in ("mh-w1", "mh-w2") and int(r["attempt"]) > 1]
spread = collections.Counter(per_job.values())
print(f"multihost: jobs {planned}, partitions {partitions} (2 workers cut off for {part_s} s; {held} jobs "
      f"leased to them then), requeues {requeued} ({req_part} during the partition), rows {len(rows)}, rows per job "
      + ", ".join(f"{k}: {v} jobs" for k, v in sorted(spread.items()))
      + f", duplicates {dups}, missing {planned - len(per_job)}")
print("multihost: rows by status: " + ", ".join(f"{k} {v}" for k, v in sorted(by_status.items()))
      + "; by worker: " + ", ".join(f"{k} {v}" for k, v in sorted(by_worker.items()))
      + f"; rows of a later attempt {len(later)}; jobs of the cut-off workers that ended on w3/w4 "
      f"{len(cut_elsewhere)} of {len(cut_ids)}")
print(f"multihost: refused peers: {refused} handshakes with an unknown key (rogue worker and client); "
      f"rogue client exit {rogue_rc}; rogue worker registered: {'no' if rogue_leased < 0 else 'YES'}, "
      f"its rows: {by_worker.get('rogue-worker', 0)}")
errors = []
if dups or len(per_job) != planned or len(rows) != planned: errors.append("not one row per job")
if set(by_status) != {"PASS"}: errors.append("a row is not PASS")
if requeued < 1 or req_part < 1: errors.append("no requeue")
if not cut_ids or len(cut_elsewhere) != len(cut_ids): errors.append("jobs of the cut-off workers did not run elsewhere")
if refused < 2 or rogue_leased >= 0 or by_worker.get("rogue-worker") or rogue_rc == 0:
    errors.append("an unauthenticated peer was let in")
print("multihost: " + ("passed" if not errors else "FAILED: " + "; ".join(errors)))
sys.exit(1 if errors else 0)
PY
rc=$?
echo "multihost: rogue client said: $(tail -n 1 <<< "$rogue_client_out")"
[ $rc -eq 0 ] || fail "checks above"
exit 0
