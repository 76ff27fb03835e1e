#!/usr/bin/env bash
# Experiments per hour per GPU for a softmax campaign with full verification (five stages) and
# cold timing, and the fraction of wall time the GPUs were busy. A benchmark, not a test.
#   bench/throughput.sh [BUILD_DIR] [CAMPAIGN]   (default: examples/campaigns/softmax_h200.toml, 288 jobs)
# Busy fraction: nvidia-smi's utilization.gpu (percent of each sample period in which a kernel
# was running on the GPU), sampled every 200 ms over the whole command, averaged over samples
# and GPUs. The steady-state wall time runs between the campaign's first and last result (the result
# rows' completion times: first to last), so farm start-up (Redis, coordinator, sandbox
# calibration) is left out; the whole command's rate is printed too.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
CAMPAIGN=${2:-examples/campaigns/softmax_h200.toml}
OUT=${OUT:-$PWD/bench-out}/throughput
mkdir -p "$OUT"
# `run` appends to results.tsv; the rows counted below are this run's only.
rm -f "$OUT"/{results.tsv,results.json}
WORK=$(mktemp -d /tmp/ak-throughput-XXXXXX)
# The default campaign asks for an H200 ([requires] gpu_model); on another GPU the same jobs run
# without that requirement (a farm would otherwise cancel them: no worker of the run offers it).
MODEL=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if grep -q '^gpu_model = ' "$CAMPAIGN" && ! grep -qiF "gpu_model = \"$MODEL\"" "$CAMPAIGN"; then
  sed '/^gpu_model = /d' "$CAMPAIGN" > "$WORK/campaign.toml"
  echo "$CAMPAIGN asks for $(sed -n 's/^gpu_model = //p' "$CAMPAIGN"); running its jobs on this $MODEL without that requirement"
  CAMPAIGN=$WORK/campaign.toml
fi
GPUS=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
nvidia-smi --query-gpu=timestamp,index,utilization.gpu,clocks.sm,power.draw --format=csv,noheader,nounits -lms 200 \
  > "$OUT/utilization.csv" &
SAMPLER=$!
trap 'kill "$SAMPLER" 2> /dev/null || true' EXIT
T0=$(date +%s.%N)
"$BUILD/bin/autokernel" run --backend cuda --campaign "$CAMPAIGN" --data-dir "$WORK/.ak" --out "$OUT" \
  > "$OUT/run.log" 2>&1
T1=$(date +%s.%N)
kill "$SAMPLER" 2>/dev/null || true
wait "$SAMPLER" 2>/dev/null || true
JOBS=$(($(wc -l < "$OUT/results.tsv") - 1))
PASS=$(awk -v cols=correctness -f bench/tsv.awk "$OUT/results.tsv" | grep -c '^PASS$' || true)
# steady-state window: first to last completion; (jobs - 1) results arrived in it
read -r FIRST_MS LAST_MS < <(awk -v cols=completed_wall_ms -f bench/tsv.awk "$OUT/results.tsv" | sort -n | awk 'NR == 1 {f = $1} {l = $1} END {print f, l}')
# utilization samples while the campaign ran (all of them: start-up is short next to it)
BUSY=$(awk -F', *' '{s += $3; n++} END {if (n) printf "%.1f", s / n; else print "nan"}' "$OUT/utilization.csv")
awk -v jobs="$JOBS" -v pass="$PASS" -v gpus="$GPUS" -v t0="$T0" -v t1="$T1" -v first="$FIRST_MS" -v last="$LAST_MS" \
    -v busy="$BUSY" -v gpu="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" -v date="$(date -u +%FT%TZ)" 'BEGIN {
  total = t1 - t0
  window = (last > first) ? (last - first) / 1000 : total
  printf "%s, %d GPU(s), %s\n", gpu, gpus, date
  printf "campaign: %d jobs (%d PASS), full verification (smoke, sweep, hostile, determinism, edge), cold L2 timing, audit\n", jobs, pass
  printf "wall: %.1f s from first to last result (%.1f s for the whole command incl. build-free start-up)\n", window, total
  printf "experiments per hour per GPU: %.0f steady state ((jobs - 1) / window), %.0f over the whole command\n", (jobs - 1) / window * 3600 / gpus, jobs / total * 3600 / gpus
  printf "GPU busy (nvidia-smi utilization.gpu, mean of 200 ms samples): %s%%\n", busy
}' | tee "$OUT/summary.txt"
