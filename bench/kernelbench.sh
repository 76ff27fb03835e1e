#!/usr/bin/env bash
# KernelBench on one GPU host: a coordinator (private Redis), one worker per GPU, then phases run
# one after the other against that farm:
#   eager:LEVELS[:IDS]    the farm's eager baselines of the selection (kb baseline)
#   compile:LEVELS[:IDS]  its torch.compile (inductor default) baselines; compile-max-autotune too
#   agree:LEVELS[:IDS]    KernelBench's own timing.py on the same problems, beside the farm's eager
#                         figures measured so far (bench/kernelbench_agreement.py)
#   builtin:LEVELS[:IDS]  a sweep of the kernel library's built-in candidates, fast_p against every
#                         baseline measured so far
#   sweep:LEVELS[:IDS]    a sweep of the generations in $AK_KB_GENERATIONS
# IDS "all" or empty: every problem of the levels. A fourth field, PHASE:LEVELS:IDS:SECONDS, caps
# how long that phase waits for its campaign (else AK_KB_WAIT_S). Each baseline phase adds its problems to one
# baseline file per mode. Output: a few flat files under $OUT/kernelbench (baseline_time_torch*.json,
# agreement.json, scores-<phase>.json, eval_results-<phase>-level<L>.json, the logs); the farm's
# state and generated files live in a /tmp folder that is removed. Progress on stdout.
#   bench/kernelbench.sh BUILD_DIR KERNELBENCH_CHECKOUT PHASE...
# Environment: AK_KB_SLOTS (jobs at once per GPU, sharing it through the harness's lock; default
# 8), AK_KB_TIMEOUT_MS (per job; default 300000), AK_KB_WAIT_S (the longest a phase waits for its
# campaign before writing what finished; default 0, no limit), AK_KB_FORK_SERVER=1 (the worker's
# --kb-fork-server: harness steps forked from one process that imported torch once),
# AK_KB_GENERATIONS (for sweep),
# AK_KB_BACKEND (cuda, or cpu for a host without a GPU), AK_KB_BASELINES (KernelBench baseline
# files that sweeps also score against, for problems this farm has not measured), AK_KB_BUDGET_S
# (each phase waits at most what is left of this many seconds, less 20 s for writing its files, and
# one with nothing left is skipped; a phase stopped by its wait cancels its campaign, so its
# unfinished jobs do not hold the next phase's slots), AK_KB_GPU_MODEL (the campaigns run on
# workers of this model only, e.g. "NVIDIA H200"), AK_KB_RESUME (a folder of baseline files of that
# model, e.g. an earlier run's $OUT/kernelbench: the baseline phases start from them and measure
# only the problems they lack, kb baseline --skip-measured, and sweeps score against them; an agree
# phase then compares with those files' eager figures, measured in that earlier run).
set -uo pipefail
B=${1:?usage: kernelbench.sh BUILD_DIR KERNELBENCH_CHECKOUT PHASE...}
KB=${2:?KernelBench checkout}
shift 2
[ $# -gt 0 ] || set -- eager:1-3 agree:1-3:1-8
OUT=${OUT:-$PWD/gpu-out}/kernelbench
mkdir -p "$OUT"
AK="$B/bin/autokernel"
STATE=$(mktemp -d /tmp/ak-kb-XXXXXX)
"$AK" --log-level warn coordinator --data-dir "$STATE" --workers-bind tcp://127.0.0.1:25555 \
  --clients-bind tcp://127.0.0.1:25556 --metrics "" > "$OUT/coordinator.log" 2>&1 &
COORD=$!
fork=(); [ "${AK_KB_FORK_SERVER:-0}" = 1 ] && fork=(--kb-fork-server)
"$AK" --log-level info worker --backend "${AK_KB_BACKEND:-cuda}" --gpus all --kb-slots "${AK_KB_SLOTS:-8}" "${fork[@]}" --coordinator tcp://127.0.0.1:25555 \
  --cache-dir "$STATE/cache" --state-dir "$STATE/worker" > "$OUT/worker.log" 2>&1 &
WORKER=$!
trap 'kill $WORKER $COORD 2>/dev/null; wait 2>/dev/null; rm -rf "$STATE"' EXIT
C=(--client tcp://127.0.0.1:25556 --timeout-ms 60000 --job-timeout-ms "${AK_KB_TIMEOUT_MS:-300000}")
files=(); for f in ${AK_KB_BASELINES:-}; do files+=(--baselines "$f"); done
KBOUT=$STATE/out
gm=(); skip=(); model=${AK_KB_GPU_MODEL:-}
[ "${AK_KB_BACKEND:-cuda}" = cpu ] && model=cpu  # cpu workers: the files of "cpu", no --gpu-model
[ -n "$model" ] && [ "$model" != cpu ] && gm=(--gpu-model "$model")
if [ -n "${AK_KB_RESUME:-}" ]; then
  [ -n "$model" ] || { echo "AK_KB_RESUME needs AK_KB_GPU_MODEL (baseline files are per GPU model)"; exit 2; }
  hw=$KBOUT/results/timing/${model//[^[:alnum:]]/_}
  mkdir -p "$hw"
  cp "$AK_KB_RESUME"/baseline_time_torch*.json "$hw/" || exit 2
  skip=(--skip-measured)
  # sweeps score against them too (the farm's own rows hold only what this run measures)
  for f in "$hw"/baseline_time_torch*.json; do files+=(--baselines "$f"); done
fi
quiet() { tr '\r' '\n' | grep --line-buffered -v '^\['; }
END=$(( $(date +%s) + ${AK_KB_BUDGET_S:-0} ))
for phase in "$@"; do
  IFS=: read -r what levels ids wait <<< "$phase"
  sel=(--levels "$levels"); [ -n "$ids" ] && [ "$ids" != all ] && sel+=(--ids "$ids")
  wait=${wait:-${AK_KB_WAIT_S:-0}}
  if [ "${AK_KB_BUDGET_S:-0}" -gt 0 ]; then
    left=$(( END - $(date +%s) - 20 ))
    if [ "$left" -le 0 ]; then echo "== $phase skipped: the budget is spent"; continue; fi
    if [ "$wait" = 0 ] || [ "$wait" -gt "$left" ]; then wait=$left; fi
  fi
  sel+=(--wait-s "$wait" --cancel-at-stop)  # a phase's leftovers would hold the next phase's slots
  echo "== $phase ($(date -u +%H:%M:%S))"
  start=$(date +%s)
  case $what in
    eager|compile|compile-*)
      "$AK" kb baseline --kernelbench "$KB" "${sel[@]}" --modes "$what" --backend "${AK_KB_BACKEND:-cuda}" "${gm[@]}" "${skip[@]}" \
        --out "$KBOUT" "${C[@]}" 2>&1 | quiet
      echo "$phase: rc=${PIPESTATUS[0]} wall $(( $(date +%s) - start )) s"
      cp "$KBOUT"/results/timing/*/baseline_time_torch*.json "$OUT/" 2>/dev/null ;;
    agree)
      F=$(ls "$KBOUT"/results/timing/*/baseline_time_torch.json 2>/dev/null | head -1)
      if [ -z "$F" ]; then echo "$phase: no eager baselines measured before it"; continue; fi
      limit=(); [ "${AK_KB_BUDGET_S:-0}" -gt 0 ] && limit=(timeout "$wait")
      "${limit[@]}" python3 "$(dirname "$0")/kernelbench_agreement.py" --kernelbench "$KB" --farm "$F" --levels "$levels" \
        --ids "${ids/all/}" --json "$OUT/agreement.json" 2>&1
      echo "$phase: rc=$? wall $(( $(date +%s) - start )) s" ;;
    builtin|sweep)
      src=(--builtin); [ "$what" = sweep ] && src=(--generations "${AK_KB_GENERATIONS:?sweep needs AK_KB_GENERATIONS}" --sample-backend torch)
      "$AK" kb sweep --kernelbench "$KB" "${sel[@]}" "${src[@]}" "${files[@]}" --backend "${AK_KB_BACKEND:-cuda}" "${gm[@]}" --out "$KBOUT/$what" "${C[@]}" 2>&1 | quiet
      echo "$phase: rc=${PIPESTATUS[0]} wall $(( $(date +%s) - start )) s"
      cp "$KBOUT/$what/scores.json" "$OUT/scores-$what.json" 2>/dev/null
      for f in "$KBOUT/$what"/level*/eval_results.json; do
        [ -f "$f" ] && cp "$f" "$OUT/eval_results-$what-$(basename "$(dirname "$f")").json"
      done ;;
    *) echo "unknown phase '$phase' (eager, compile, compile-<mode>, agree, builtin, sweep)"; exit 2 ;;
  esac
done
