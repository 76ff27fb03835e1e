#!/usr/bin/env bash
# The kernel library's benchmark on a GPU: every kernel type's CUDA starter, default
# configuration, at each of its declared shapes in every dtype, through the farm (five-stage
# verification, cold timing in alternation with PyTorch eager), then torch.compile(mode=
# "max-autotune") of the same ops timed cold by triton.testing.do_bench; prints the results table.
#   bench/library.sh [BUILD_DIR] [TYPES]       (TYPES: comma-separated; default every type but the
#                                               norms at another eps, rmsnorm_e5 and layernorm_e12/_e6)
#   AK_LIBRARY_TRITON_TYPES=softmax,layernorm  (types also run on the triton backend; default: every type with a Triton source)
#   AK_LIBRARY_COMPILE=all|largest|none        (default largest: one shape per type and dtype)
#   AK_LIBRARY_DTYPES=bf16,fp16                 (dtypes of the torch.compile column; default all)
#   AK_LIBRARY_VARIANTS=none                    (on a Hopper GPU (compute capability 9.x) the variants of
#                                               bench/library_variants_hopper.json also run, each a row
#                                               "<type> [<variant>]"; none: the starters only)
# Writes under $OUT/library (default ./bench-out/library): results.tsv/json, table.md, compile.json.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
# (rmsnorm_e5, layernorm_e12 and layernorm_e6 are rmsnorm's and layernorm's kernels at another eps
# constant: the same speed, so not run by default.)
TYPES=${2:-softmax,reduce,reduce_max,rmsnorm,layernorm,cross_entropy,rotary_embedding,matmul,flash_attention,flash_attention_causal,fused_mlp}
# Types with a Triton source get a second campaign on the triton backend.
TRITON_TYPES=${AK_LIBRARY_TRITON_TYPES-softmax,reduce,reduce_max,rmsnorm,layernorm,cross_entropy,rotary_embedding,matmul}
OUT=${OUT:-$PWD/bench-out}/library
mkdir -p "$OUT"
# An earlier run's outputs go first, so that nothing printed below can come from it.
rm -f "$OUT"/{results.tsv,results.json,table.md,compile.json,compile.log,run.log,date.txt,tuning.json} "$OUT"/studies-*.json
WORK=$(mktemp -d /tmp/ak-library-XXXXXX)
args=()
for t in ${TYPES//,/ }; do
  cat > "$WORK/$t.json" <<JSON
{"name": "library-$t", "kernel_type": "$t", "backend": "cuda", "configs": "default",
 "tag": "bench/library", "description": "starter, default config", "timeout_ms": 300000,
 "measure": {"warmup": 10, "min_samples": 20, "max_samples": 500, "max_time_ms": 2000, "noise_target": 0.005, "cold": true}}
JSON
  args+=(--campaign "$WORK/$t.json")
done
for t in ${TRITON_TYPES//,/ }; do
  sed -e 's/"backend": "cuda"/"backend": "triton"/' -e "s/\"library-$t\"/\"library-$t-triton\"/" "$WORK/$t.json" > "$WORK/$t-triton.json"
  args+=(--campaign "$WORK/$t-triton.json")
done
# The variants the kernel READMEs' ladders name for Hopper, for the types asked for: campaigns of
# their own, tagged bench/library/<variant>.
if [ "${AK_LIBRARY_VARIANTS:-auto}" != none ] &&
  nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2> /dev/null | head -1 | grep -q '^9\.'; then
  while IFS= read -r f; do args+=(--campaign "$f"); done < <(python3 - "$WORK" "$TYPES" <<'PY'
import json, sys
work, types = sys.argv[1], sys.argv[2].split(",")
for i, c in enumerate(json.load(open("bench/library_variants_hopper.json"))):
    if c["kernel_type"] in types:
        path = f"{work}/variant-{i}.json"
        json.dump(c, open(path, "w"))
        print(path)
PY
  )
fi
# A failed farm run (campaign rejected, interrupted, no results) ends the benchmark: its table
# would be partial or empty. Failed jobs are rows, not a failed run.
rc=0
"$BUILD/bin/autokernel" run --backend cuda "${args[@]}" --data-dir "$WORK/.ak" --out "$OUT" > "$OUT/run.log" 2>&1 || rc=$?
if [ "$rc" -ne 0 ]; then
  echo "farm run failed (rc=$rc); tail of $OUT/run.log:"; tail -20 "$OUT/run.log"
  exit "$rc"
fi
date -u +"%Y-%m-%dT%H:%M:%SZ" > "$OUT/date.txt"
awk -v cols=kernel_type,shape,dtype,correctness,stage,reason -f bench/tsv.awk "$OUT/results.tsv" | awk -F'\t' '$4 != "PASS"' | cut -c1-300
MODE=${AK_LIBRARY_COMPILE:-largest}
flags=()
[ "$MODE" = largest ] && flags+=(--only-largest)
if [ "$MODE" = none ]; then flags+=(--dtypes none); elif [ -n "${AK_LIBRARY_DTYPES:-}" ]; then flags+=(--dtypes "$AK_LIBRARY_DTYPES"); fi
python3 bench/library_compile.py "$OUT/results.tsv" "$OUT/compile.json" "${flags[@]}" > "$OUT/table.md" 2> "$OUT/compile.log" || {
  echo "torch.compile column failed; tail of $OUT/compile.log:"; tail -20 "$OUT/compile.log"; }
echo "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $(cat "$OUT/date.txt")"
cat "$OUT/table.md"
