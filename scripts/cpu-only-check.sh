#!/usr/bin/env bash
# The CPU-only build (issue 21): configures a second build folder with the CUDA toolkit hidden
# (CMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit, so AK_WITH_CUDA turns itself off), builds the farm's
# executable (coordinator, worker, CLI), and runs a CPU campaign through it: its coordinator with
# a private Redis, a CPU worker and `submit --wait`; then checks that a cuda worker is refused
# with the build's message. To keep CI short the CPU-only sandbox is built only with
# AK_CPU_ONLY_SANDBOX=1 (it recompiles every libtorch translation unit); otherwise the worker runs
# the main build's sandbox (--sandbox), which runs CPU jobs the same way.
# The CPU-only build compiles without optimisation or debug information (AK_CPU_CXX_FLAGS, default
# -O0): it is built to be run once here, and so it costs about half of an optimised build's time
# on CI's two cores (ctest's cpu_only_build, tests/CMakeLists.txt).
#   AK_BUILD_DIR (build): the main build, for its sandbox; AK_CPU_BUILD_DIR (build-cpu); AK_VENV (.venv);
#   AK_JOBS (nproc): build jobs
set -euo pipefail
cd "$(dirname "$0")/.."
MAIN=$(realpath "${AK_BUILD_DIR:-build}")
CPU=${AK_CPU_BUILD_DIR:-build-cpu}
VENV=$(realpath "${AK_VENV:-.venv}")
TORCH_PREFIX=$("$VENV/bin/python" -c 'import torch; print(torch.utils.cmake_prefix_path)')
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
if [ ! -f "$CPU/build.ninja" ]; then
  cmake -S . -B "$CPU" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="${AK_CPU_CXX_FLAGS:--O0}" \
        -DAK_WERROR=ON -DAK_PYTHON="$VENV/bin/python" \
        -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=TRUE "${launcher[@]}" > "$CPU.configure.log"
fi
grep -q "CPU-only build" "$CPU.configure.log" 2>/dev/null || grep -q "AK_WITH_CUDA:BOOL=OFF" "$CPU/CMakeCache.txt" ||
  { echo "cpu-only-check: $CPU is not a CPU-only build" >&2; exit 1; }
targets=(autokernel)
SANDBOX=$MAIN/bin/autokernel-sandbox
if [ "${AK_CPU_ONLY_SANDBOX:-0}" = 1 ]; then targets+=(autokernel-sandbox); SANDBOX=$(realpath "$CPU")/bin/autokernel-sandbox; fi
cmake --build "$CPU" -j "${AK_JOBS:-$(nproc)}" --target "${targets[@]}"
AK=$(realpath "$CPU")/bin/autokernel
[ ! -e "$CPU/bin/autokernel-nvrtc" ] || { echo "cpu-only-check: a CPU-only build made autokernel-nvrtc" >&2; exit 1; }

WORK=$(mktemp -d /tmp/ak-cpu-only-XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
fail() { echo "cpu-only-check: $*" >&2; for f in "$WORK"/*.log; do echo "== $f" >&2; tail -20 "$f" >&2; done; exit 1; }

if "$AK" worker --backend cuda --cache-dir "$WORK/c0" --state-dir "$WORK/s0" > "$WORK/cuda-worker.log" 2>&1; then
  fail "a cuda worker of a CPU-only build started"
fi
grep -q "this build has no CUDA backend" "$WORK/cuda-worker.log" || fail "a cuda worker was refused without saying why"

"$AK" coordinator --data-dir "$WORK/coord" --workers-bind "tcp://127.0.0.1:*" --clients-bind "tcp://127.0.0.1:*" \
  --metrics "" > "$WORK/coordinator.out" 2> "$WORK/coordinator.log" &
pids+=($!)
for _ in $(seq 300); do grep -q '^READY ' "$WORK/coordinator.out" && break; sleep 0.1; done
ready=$(grep -m1 '^READY ' "$WORK/coordinator.out" | cut -c7-) || fail "the coordinator did not come up"
endpoint() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$ready" "$1"; }
"$AK" worker --backend cpu --coordinator "$(endpoint workers)" --sandbox "$SANDBOX" --cache-dir "$WORK/cache" \
  --state-dir "$WORK/state" > "$WORK/worker.log" 2>&1 &
pids+=($!)
"$AK" submit --wait --client "$(endpoint clients)" examples/campaigns/smoke.json > "$WORK/submit.log" 2>&1 ||
  fail "the campaign failed"
"$AK" export --client "$(endpoint clients)" --tsv "$WORK/results.tsv" > /dev/null || fail "export failed"
read -r n bad < <(awk -F'\t' 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "correctness") c = i; next }
                               { n++; if ($c != "PASS") bad++ } END { print n + 0, bad + 0 }' "$WORK/results.tsv")
[ "$n" -ge 1 ] && [ "$bad" = 0 ] || fail "$bad of $n rows are not PASS"
echo "cpu-only-check: CPU-only build ($CPU): $n rows PASS through its coordinator and CPU worker (sandbox $SANDBOX)"
