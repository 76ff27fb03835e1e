#!/usr/bin/env bash
# The verify step's CUDA path on GPT-2 (tiny and small, bf16) with the library's starter kernels
# (matmul and layernorm at their default configurations) plugged in: outputs against an fp32 run
# of the same weights, 32 tokens of greedy decoding, eager / torch.compile / tuned per forward.
# Needs a GPU, nvcc and a build with libautokernel_ops.so; no farm processes (it calls
# models/verify_model.py directly, as the model runner would with a tuned manifest).
#   bash bench/verify_starters.sh BUILD_DIR [--no-compile]     (results in $OUT, default ./verify-out)
#   AK_VERIFY_SIZES="tiny small"  the GPT-2 sizes (default both; ctest models_verify_gpu runs tiny)
# Exits 1 when a verify fails, 77 (ctest's skip) without a GPU, nvcc or libautokernel_ops.so.
set -uo pipefail
cd "$(dirname "$0")/.."
B=${1:?usage: verify_starters.sh BUILD_DIR [--no-compile]}
shift
if ! nvidia-smi -L > /dev/null 2>&1 || ! command -v nvcc > /dev/null || [ ! -f "$B/bin/libautokernel_ops.so" ]; then
  echo "verify_starters: SKIPPED (no GPU, nvcc or $B/bin/libautokernel_ops.so)"; exit 77
fi
OUT=${OUT:-$PWD/verify-out}
K=$OUT/kernels
mkdir -p "$K"
MM="-DAK_BM=128 -DAK_BN=128 -DAK_BK=32 -DAK_WARPS_M=2 -DAK_WARPS_N=2 -DAK_STAGES=4 -DAK_GROUP_M=8"
nvcc -cubin -arch=sm_90a -Ikernels/matmul -DAK_DTYPE=2 $MM kernels/matmul/matmul.cu -o "$K/matmul_bf16.cubin" || exit 1
nvcc -cubin -arch=sm_90a -Ikernels/layernorm -DAK_DTYPE=2 -DAK_THREADS=256 -DAK_VEC=8 -DAK_WARP_PER_ROW=0 \
  kernels/layernorm/layernorm.cu -o "$K/layernorm_bf16.cubin" || exit 1
"${AK_PYTHON:-python3}" - "$K" <<'PY'
import json, sys
k = sys.argv[1]
mm = {"AK_BM": 128, "AK_BN": 128, "AK_BK": 32, "AK_WARPS_M": 2, "AK_WARPS_N": 2, "AK_STAGES": 4, "AK_GROUP_M": 8}
ln = {"AK_THREADS": 256, "AK_VEC": 8, "AK_WARP_PER_ROW": 0}
def e(t, shape, art, entry, cfg):
    return {"kernel_type": t, "backend": "cuda", "dtype": "bf16", "shape": shape, "config": cfg,
            "artifact": f"{k}/{art}", "entry": entry, "speedup": 1.0}
# gpt2.py: tiny is batch 2 x 32 tokens, width 64, vocabulary 512; small 1 x 1024, 768, 50257.
for name, m, d, v in (("tiny", 64, 64, 512), ("small", 1024, 768, 50257)):
    ents = [e("layernorm", [m, d], "layernorm_bf16.cubin", "ak_layernorm", ln)]
    for n, kk in ((3 * d, d), (d, d), (4 * d, d), (d, 4 * d), (v, d)):
        ents.append(e("matmul", [m, n, kk], "matmul_bf16.cubin", "ak_matmul", mm))
    json.dump({"device": "cuda:0", "arch": "sm_90a", "entries": ents}, open(f"{k}/{name}.json", "w"))
PY
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1
failed=0
for c in ${AK_VERIFY_SIZES:-tiny small}; do
  t0=$(date +%s)
  timeout 300 "${AK_PYTHON:-python3}" models/verify_model.py --model examples/gpt2:$c --device cuda --dtype bf16 \
    --manifest "$K/$c.json" --ops-lib "$B/bin/libautokernel_ops.so" --out "$OUT/gpt2_$c.json" \
    --iters 10 --warmup 3 --decode-tokens 32 "$@" > "$OUT/gpt2_$c.txt" 2>&1
  rc=$?
  # verified, and the kernels ran: a manifest whose shapes missed the model's would verify PyTorch
  [ $rc = 0 ] && ! "${AK_PYTHON:-python3}" -c 'import json, sys; sys.exit(0 if json.load(open(sys.argv[1]))["replaced"] else 1)' \
    "$OUT/gpt2_$c.json" && { echo "gpt2:$c: no call was replaced"; rc=1; }
  [ $rc = 0 ] || failed=1
  echo "gpt2:$c rc=$rc in $(( $(date +%s) - t0 )) s"; tail -25 "$OUT/gpt2_$c.txt"
done
exit $failed
