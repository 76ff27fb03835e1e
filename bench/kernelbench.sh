#!/usr/bin/env bash
# KernelBench on one GPU host: a coordinator (private Redis), one worker per GPU, the farm's eager
# and torch.compile baselines of the selected problems (results/timing/<hardware>/), KernelBench's
# own timing of the same problems in the same session (bench/kernelbench_agreement.py), and a
# sweep of generations if a folder is given. Output under $OUT/kernelbench (a few files; the
# farm's state lives in a /tmp folder that is removed), progress on stdout as it happens.
#   bench/kernelbench.sh BUILD_DIR KERNELBENCH_CHECKOUT [LEVELS] [IDS] [MODES] [GENERATIONS]
# Environment: AK_KB_SLOTS (jobs at once per GPU, sharing it through the harness's lock; default
# 8), AK_KB_AGREE_IDS (problem ids of each level that KernelBench's own timing repeats; default
# every baseline), AK_KB_TIMEOUT_MS (per job; default 300000), AK_KB_BUILTIN=1 (sweep the
# built-in candidates of level 1 after the baselines).
set -uo pipefail
B=${1:?usage: kernelbench.sh BUILD_DIR KERNELBENCH_CHECKOUT [LEVELS] [IDS] [MODES] [GENERATIONS]}
KB=${2:?KernelBench checkout}
LEVELS=${3:-1-3}
IDS=${4:-}
MODES=${5:-eager,compile}
GENS=${6:-}
OUT=${OUT:-$PWD/gpu-out}/kernelbench
mkdir -p "$OUT"
AK="$B/bin/autokernel"
STATE=$(mktemp -d /tmp/ak-kb-XXXXXX)
"$AK" --log-level warn coordinator --data-dir "$STATE" --workers-bind tcp://127.0.0.1:25555 \
  --clients-bind tcp://127.0.0.1:25556 --metrics "" > "$OUT/coordinator.log" 2>&1 &
COORD=$!
"$AK" --log-level info worker --backend cuda --gpus all --kb-slots "${AK_KB_SLOTS:-8}" --coordinator tcp://127.0.0.1:25555 \
  --cache-dir "$STATE/cache" --state-dir "$STATE/worker" > "$OUT/worker.log" 2>&1 &
WORKER=$!
trap 'kill $WORKER $COORD 2>/dev/null; wait 2>/dev/null; rm -rf "$STATE"' EXIT
C="--client tcp://127.0.0.1:25556 --timeout-ms 60000"
ids=(); [ -n "$IDS" ] && ids=(--ids "$IDS")
modes=(); IFS=, read -ra ms <<< "$MODES"; for m in "${ms[@]}"; do modes+=(--modes "$m"); done
start=$(date +%s)
"$AK" kb baseline --kernelbench "$KB" --levels "$LEVELS" "${ids[@]}" "${modes[@]}" --backend cuda \
  --job-timeout-ms "${AK_KB_TIMEOUT_MS:-300000}" --out "$OUT" $C 2>&1 | tr '\r' '\n' | grep --line-buffered -v '^\['
echo "kb baseline rc=${PIPESTATUS[0]} wall $(( $(date +%s) - start )) s"
F=$(ls "$OUT"/results/timing/*/baseline_time_torch.json 2>/dev/null | head -1)
if [ -n "$F" ]; then
  python3 "$(dirname "$0")/kernelbench_agreement.py" --kernelbench "$KB" --farm "$F" --ids "${AK_KB_AGREE_IDS:-}" \
    --json "$OUT/agreement.json" 2>&1
fi
if [ -n "$GENS" ]; then
  "$AK" kb sweep --kernelbench "$KB" --levels "$LEVELS" "${ids[@]}" --generations "$GENS" --backend cuda \
    --sample-backend torch --out "$OUT/sweep" $C 2>&1 | tr '\r' '\n' | grep --line-buffered -v '^\['
fi
