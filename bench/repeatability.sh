#!/usr/bin/env bash
# Repeatability of the farm's cold timing on one GPU:
#   1. one kernel (softmax starter, 4096x4096 fp16) measured in 10 separate jobs: the spread of
#      the ten medians, (max - min) / median, must stay within 1%;
#   2. the PyTorch baseline those jobs measured (torch.softmax, same shape and dtype, cold)
#      against triton.testing.do_bench's median for the same op on the same GPU, right after:
#      within 3%.
#   bench/repeatability.sh [BUILD_DIR]     (needs a GPU, torch and triton; writes under $OUT or ./bench-out)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
OUT=${OUT:-$PWD/bench-out}/repeatability
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/ak-repeat-XXXXXX)
"$BUILD/bin/autokernel" run --backend cuda --campaign bench/campaigns/repeat10_softmax_fp16.toml \
  --data-dir "$WORK/.ak" --out "$OUT" > "$OUT/run.log" 2>&1
python3 bench/do_bench_softmax.py 4096 4096 > "$OUT/do_bench.json"
awk -v cols=correctness,latency_us,baseline_us,samples,rel_se,sm_clock_mhz,throttled,gpu -f bench/tsv.awk "$OUT/results.tsv" \
  > "$OUT/medians.tsv"
date -u +"%Y-%m-%dT%H:%M:%SZ" > "$OUT/date.txt"
DOB=$(grep -o '"do_bench_median_us": [0-9.e+-]*' "$OUT/do_bench.json" | awk '{print $2}')
N=$(wc -l < "$OUT/medians.tsv")
NOT_PASS=$(awk -F'\t' '$1 != "PASS"' "$OUT/medians.tsv" | wc -l)
THROTTLED=$(awk -F'\t' '$7 == "true"' "$OUT/medians.tsv" | wc -l)
GPU=$(head -1 "$OUT/medians.tsv" | cut -f8)
# min, median, max of a column (sorted numerically; median of an even count is the mean of the middle two)
stats() { cut -f"$1" "$OUT/medians.tsv" | sort -g | awk '{v[NR] = $1} END {m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; print v[1], m, v[NR]}'; }
read -r CMIN CMED CMAX < <(stats 2)
read -r BMIN BMED BMAX < <(stats 3)
awk -v n="$N" -v bad="$NOT_PASS" -v thr="$THROTTLED" -v gpu="$GPU" -v dob="$DOB" \
    -v cmin="$CMIN" -v cmed="$CMED" -v cmax="$CMAX" -v bmin="$BMIN" -v bmed="$BMED" -v bmax="$BMAX" 'BEGIN {
  if (n != 10 || bad) { printf "expected 10 PASS rows, got %d (%d not PASS)\n", n, bad; exit 1 }
  spread = (cmax - cmin) / cmed * 100
  printf "gpu %s; 10 jobs, softmax starter 4096x4096 fp16, cold L2\n", gpu
  printf "candidate medians: min %.3f  median %.3f  max %.3f us; spread (max-min)/median = %.2f%% (limit 1%%)\n", cmin, cmed, cmax, spread
  printf "torch.softmax baseline medians (farm): min %.3f  median %.3f  max %.3f us\n", bmin, bmed, bmax
  printf "triton.testing.do_bench median: %.3f us; farm / do_bench = %.4f (limit: within 3%%)\n", dob, bmed / dob
  printf "throttled jobs: %d of 10\n", thr
  ok = spread <= 1.0 && bmed / dob >= 0.97 && bmed / dob <= 1.03
  print ok ? "REPEATABILITY OK" : "REPEATABILITY NOT MET"
  exit ok ? 0 : 1
}' | tee "$OUT/summary.txt"
