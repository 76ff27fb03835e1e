#!/usr/bin/env bash
# Build, test and run the farm on a GPU host that has CUDA, PyTorch, cmake and ninja but no
# package access: the Debian packages the farm needs come unpacked from a folder of .debs
# (fetched beforehand with scripts/fetch-gpu-debs.sh: ZeroMQ, hiredis, prometheus-cpp, Redis, googletest, spdlog, CLI11, toml++,
# xxhash, nlohmann-json, libseccomp). Logs and results go to $OUT (default ./gpu-out).
# Then: the device's calibration, ctest -L gpu (sandbox and hostile suites), bench/repeatability.sh
# and bench/throughput.sh; AK_GPU_STEPS picks a subset ("ctest repeat throughput"), "library" runs
# bench/library.sh (the kernel library's results table), "kernelbench" KernelBench phases: baselines,
# their agreement with KernelBench's own timing, sweeps (bench/kernelbench.sh), "study" the H200 study campaign
# (examples/campaigns/study_h200.toml, or AK_STUDY_CAMPAIGN; AK_STUDY_TIMEOUT, default 540 s) with its
# tuning-database export in $OUT/study, "confine" the
# confinement layers this host gives the worker, as this user and as an unprivileged one,
# "dashboards" the live dashboards test with the host's GPU; "wgmma" matmul's Hopper path against its
# mma.sync path (examples/campaigns/matmul_wgmma_hopper.toml, cut by AK_WGMMA_SHAPES, AK_WGMMA_DTYPES and
# AK_WGMMA_KEEP), in $OUT/wgmma; "rowwise" the row-wise types' register caches and chunks against
# their earlier paths (examples/campaigns/rowwise_*.toml, cut by AK_ROWWISE), in $OUT/rowwise;
# "flash" flash_attention's wgmma path against its mma.sync path, in $OUT/flash; "mlp" fused_mlp on
# matmul's wgmma and TMA paths, in $OUT/mlp.
# "models" the profile of each example model (AK_MODELS, default GPT-2 small, the LLaMA-style 1B
# and 7B-with-4-layers, BERT-base; bf16) against the calibrated ceilings, tables and JSON in $OUT/models.
# "ncu" Nsight Compute on the farm's kernel and PyTorch's for each bench/campaigns/ncu_*.toml
# (AK_NCU_CAMPAIGNS), in $OUT/ncu.tgz.
# "campaign" the campaign files of AK_CAMPAIGNS, in $OUT/campaign (bench/campaigns/check_*.toml: checks of
# launch limits and defaults that a GPU found wrong once).
# "export" the Hugging Face Kernels package built and called on this GPU (tests/models/export_test.py --gpu).
# "plug" the torch library's TMA path, eager and in CUDA graphs (tests/models/plug_tma_test.py).
# "library_old" bench/library.sh of older trees (AK_LIBRARY_OLD), for a before/after on one card.
# "pipeline" runs `autokernel run --model` for each of AK_PIPELINE_MODELS (default examples/gpt2;
# AK_PIPELINE_TRIALS trials per study, default 16): profile, extract, the studies, verify; the
# reports of each model in $OUT/pipeline.tgz (pipeline/<model>/).
# AK_CTEST_TIMEOUT bounds the ctest step (default 560 s). AK_GPU_PREBUILT=DIR skips the build and
# runs the install tree scripts/gpu-prebuild.sh made elsewhere (carried along; not for ctest).
#   scripts/gpu-session.sh DEBS_DIR [ctest args...]
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
DEBS=${1:?usage: gpu-session.sh DEBS_DIR [ctest args]}
shift
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
SYS=/tmp/ak-sysroot
mkdir -p "$SYS"
for f in "$DEBS"/*.deb; do dpkg -x "$f" "$SYS"; done
export LD_LIBRARY_PATH=$SYS/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export PATH=$SYS/usr/bin:$PATH:/usr/local/cuda/bin
export PKG_CONFIG_PATH=$SYS/usr/lib/x86_64-linux-gnu/pkgconfig:$SYS/usr/share/pkgconfig
export PKG_CONFIG_SYSROOT_DIR=$SYS
TORCH_PREFIX=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
nvidia-smi --query-gpu=name,pci.bus_id,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
if [ -n "${AK_GPU_PREBUILT:-}" ]; then
  # An install tree made on another machine (scripts/gpu-prebuild.sh; carried to this one): no
  # build here. The sandbox finds libtorch and NVRTC through LD_LIBRARY_PATH.
  B=$(cd "$AK_GPU_PREBUILT" && pwd) || exit 1
  TORCH_LIB=$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
  export LD_LIBRARY_PATH=$B/lib:$TORCH_LIB:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
  missing=$(ldd "$B"/bin/* "$B"/lib/*.so 2>&1 | grep "not found" | sort -u)
  [ -z "$missing" ] || { echo "prebuilt tree lacks libraries here:"; echo "$missing"; exit 1; }
  "$B/bin/autokernel" --version || exit 1
  echo "prebuilt ok"
else
  {
    cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAK_WERROR=ON \
      -DCMAKE_PREFIX_PATH="$TORCH_PREFIX;$SYS/usr;$SYS/usr/lib/x86_64-linux-gnu/cmake;$SYS/usr/share/cmake" \
      -DCMAKE_CXX_FLAGS="-isystem $SYS/usr/include" && ninja -C build-gpu -j "$(nproc)" ${AK_GPU_TARGETS:-}
  } > "$OUT/build.log" 2>&1 || { tail -60 "$OUT/build.log"; exit 1; }
  echo "build ok"
  B=$PWD/build-gpu
fi
export OUT
"$B/bin/autokernel" calibrate | tee "$OUT/calibrate.txt"
# campaign_step NAME TIMEOUT CAMPAIGN_ARGS...: `autokernel run --backend cuda` on the given campaigns in
# $OUT/NAME (each job verified, then timed against PyTorch), its rc and its results table.
campaign_step() {
  local name=$1 limit=$2 d="$OUT/$1"
  shift 2
  mkdir -p "$d"
  (cd "$d" && timeout "$limit" "$B/bin/autokernel" run --backend cuda "$@" --data-dir "$d/.ak" > run.log 2>&1)
  echo "$name rc=$?"; rm -rf "$d/.ak"
  awk -v cols=kernel_type,shape,dtype,config,correctness,latency_us,baseline_us,speedup_vs_pytorch,pct_peak \
    -f bench/tsv.awk "$d/results.tsv" | cut -c1-240
}
STEPS=${AK_GPU_STEPS:-ctest repeat throughput}
for step in $STEPS; do
  case $step in
    ctest)
      [ -z "${AK_GPU_PREBUILT:-}" ] || { echo "ctest needs the build tree: leave AK_GPU_PREBUILT unset"; continue; }
      # -V for the verdict table the hostile suite prints
      (cd build-gpu && timeout "${AK_CTEST_TIMEOUT:-560}" ctest -L gpu -V -j 1 "$@") > "$OUT/ctest-gpu.log" 2>&1
      echo "ctest -L gpu rc=$?"
      grep -E "tests passed|tests failed|Failed|SKIPPED|\*\*\*|hostile suite|: +[0-9][0-9]_[a-z_]+: " "$OUT/ctest-gpu.log" | cut -c1-220 | head -60 ;;
    models)
      mkdir -p "$OUT/models"
      # (the sandbox's log lines share stdout with the JSON: keep from its first line on)
      "$B/bin/autokernel" calibrate --json 2> "$OUT/models/calibrate.log" | sed -n '/^{/,$p' > "$OUT/models/ceilings.json"
      for m in ${AK_MODELS:-examples/gpt2 examples/llama:1b examples/llama:7b-4l examples/bert}; do
        f=$(echo "$m" | tr '/:' '__')
        t0=$(date +%s%N)
        timeout 300 python3 models/profile_model.py --model "$m" --dtype bf16 --ceilings "$OUT/models/ceilings.json" \
          --out "$OUT/models/$f.json" > "$OUT/models/$f.txt" 2> "$OUT/models/$f.log"
        rc=$?; echo "profile $m rc=$rc in $(( ($(date +%s%N) - t0) / 1000000 )) ms"; head -16 "$OUT/models/$f.txt"; tail -1 "$OUT/models/$f.txt"
      done ;;
    pipeline)
      # Issue 20's must-show: the whole model pipeline unattended (profile, extract, the studies,
      # verify against eager and torch.compile), one farm per model; its reports and wall time.
      for m in ${AK_PIPELINE_MODELS:-examples/gpt2}; do
        f=$(echo "$m" | tr '/:' '__'); d="$OUT/pipeline/$f"; mkdir -p "$d"
        t0=$(date +%s%N)
        (cd "$d" && timeout "${AK_PIPELINE_TIMEOUT:-540}" "$B/bin/autokernel" run --model "$m" \
          --budget-trials "${AK_PIPELINE_TRIALS:-16}" --data-dir "$d/.ak" --out "$d") > "$d/run.log" 2>&1
        rc=$?; echo "run --model $m rc=$rc in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
        grep -v "^\s*$" "$d/run.log" | grep -v $'\r' | grep -v "^PASS\|^FAIL" | tail -40
        rm -rf "$d/.ak"
      done
      # one file for the reports: a device call brings back at most 8 files from $OUT
      [ -d "$OUT/pipeline" ] && tar czf "$OUT/pipeline.tgz" -C "$OUT" pipeline && rm -rf "$OUT/pipeline" ;;
    confine)
      # What a worker started here would get, then what one started by an ordinary user would.
      { "$B/bin/autokernel" worker --confinement-report
        if [ "$(id -u)" = 0 ] && command -v setpriv > /dev/null; then
          setpriv --reuid=65534 --regid=65534 --clear-groups "$B/bin/autokernel" worker --confinement-report
        fi; } > "$OUT/confinement.txt" 2>&1
      cat "$OUT/confinement.txt" ;;
    repeat)
      timeout 300 bash bench/repeatability.sh "$B"; echo "repeatability rc=$?" ;;
    throughput)
      timeout 400 bash bench/throughput.sh "$B"; echo "throughput rc=$?"
      awk -v cols=correctness,stage -f bench/tsv.awk "$OUT/throughput/results.tsv" | sort | uniq -c ;;
    study)
      mkdir -p "$OUT/study"
      campaign=$(realpath "${AK_STUDY_CAMPAIGN:-examples/campaigns/study_h200.toml}")
      (cd "$OUT/study" && timeout "${AK_STUDY_TIMEOUT:-540}" "$B/bin/autokernel" run --campaign "$campaign" \
        --data-dir "$OUT/study/.ak" --out "$OUT/study") > "$OUT/study/run.log" 2>&1
      echo "study rc=$?"
      grep -v "^\s*$" "$OUT/study/run.log" | grep -v $'\r' | tail -45
      rm -rf "$OUT/study/.ak" ;;
    kernelbench)
      # KernelBench phases (bench/kernelbench.sh) against a checkout in .kb/, kept outside the
      # repository: by default the farm's eager baselines of levels 1-3 (8 jobs at once sharing
      # the GPU through the harness's lock) and KernelBench's own timing of problems 1-8 of each
      # level; AK_KB_PHASES picks others ("eager:1 compile:1 agree:1-3:1-8 builtin:1").
      # AK_GPU_TARGETS="autokernel autokernel-sandbox" builds only what it needs. Generated files
      # stay out of $OUT (what comes back is limited).
      KBC=${AK_KERNELBENCH:-$PWD/.kb/KernelBench}
      # shellcheck disable=SC2086
      timeout "${AK_KB_STEP_TIMEOUT:-470}" bash bench/kernelbench.sh "$B" "$KBC" ${AK_KB_PHASES:-} > "$OUT/kernelbench.log" 2>&1
      echo "kernelbench rc=$?"; grep -v "^ *$" "$OUT/kernelbench.log" | grep -v "^\[Profiling\]\|^Using PyTorch" | tail -120
      # The baseline files stay in the build folder too: a next call on the same machine resumes
      # from them with AK_KB_RESUME=$PWD/build-gpu/kb-last.
      mkdir -p "$B/kb-last" && cp "$OUT"/kernelbench/baseline_time_torch*.json "$B/kb-last/" 2>/dev/null
      # one file for the phases' files: a device call brings back at most 8 files from $OUT
      tar czf "$OUT/kernelbench.tgz" -C "$OUT" kernelbench && rm -rf "$OUT/kernelbench" ;;
    dashboards)
      # Issue 21: every Grafana panel's query answers from a live farm with a cuda worker (NVML's
      # per-GPU series included), scraped by the Debian package's prometheus (in DEBS_DIR).
      # (the test itself, not through ctest: it needs only the autokernel executable, so a prebuilt
      # tree serves too)
      timeout 240 python3 tests/dashboards/live_farm_test.py "$B/bin/autokernel" "$PWD" > "$OUT/dashboards.log" 2>&1
      echo "dashboards rc=$?"; grep -E "NO DATA|SKIPPED|FAILED|warns|queries checked|during the cuda|^ok .*([Gg][Pp][Uu]|[Pp]ower|[Cc]lock)" "$OUT/dashboards.log" | cut -c1-300 | head -40 ;;
    export)
      # Issue 20: `autokernel export --hf` writes and builds the Hugging Face Kernels package here,
      # and each exported kernel is called through it for its shape against an fp32 reference
      # (tests/models/export_test.py --gpu; only the autokernel executable is needed, so a
      # prebuilt tree serves too).
      timeout "${AK_EXPORT_TIMEOUT:-300}" python3 tests/models/export_test.py --gpu --autokernel "$B/bin/autokernel" > "$OUT/export.log" 2>&1
      echo "export rc=$?"; grep -E " \.\.\. |^Ran |^OK|^FAILED" "$OUT/export.log" | cut -c1-240 | head -40
      sed -n '/"err": {/,/}/p' "$OUT/export.log" | head -14 ;;
    library)
      timeout "${AK_LIBRARY_TIMEOUT:-540}" bash bench/library.sh "$B" ${AK_LIBRARY_TYPES:-}; echo "library rc=$?" ;;
    library_old)
      # Issue 18's before/after on one card: each tree of AK_LIBRARY_OLD (folders holding an older
      # commit's bench/ and stripped bin/autokernel{,-sandbox}, carried along; their libraries come
      # from this script's LD_LIBRARY_PATH), in the order given (e.g. "A B A"), AK_LIBRARY_TYPES,
      # CUDA starters only, in $OUT/library_old/<n>-<folder>/.
      n=0
      for d in ${AK_LIBRARY_OLD:?AK_LIBRARY_OLD names the older trees}; do
        n=$((n + 1)); o="$OUT/library_old/$n-$(basename "$d")"; mkdir -p "$o"
        OUT=$o AK_LIBRARY_TRITON_TYPES= AK_LIBRARY_COMPILE=none timeout "${AK_LIBRARY_OLD_TIMEOUT:-100}" \
          bash "$d/bench/library.sh" "$(cd "$d" && pwd)" ${AK_LIBRARY_TYPES:-} > "$o/log" 2>&1
        echo "library_old $n $d rc=$? $(grep -c PASS "$o/library/results.tsv" 2>/dev/null) PASS"
      done
      tar czf "$OUT/library_old.tgz" -C "$OUT" library_old && rm -rf "$OUT/library_old" ;;
    plug)
      # Tuned kernels that read TMA tensor maps through libautokernel_ops.so, eagerly and in CUDA
      # graphs, on their TMA path (tests/models/plug_tma_test.py; a prebuilt tree serves).
      ops=$B/lib/libautokernel_ops.so; [ -f "$ops" ] || ops=$B/bin/libautokernel_ops.so
      timeout 200 python3 tests/models/plug_tma_test.py --gpu --ops-lib "$ops" > "$OUT/plug_tma.log" 2>&1
      echo "plug_tma rc=$?"; tail -8 "$OUT/plug_tma.log" ;;
    rowwise)
      # the register caches (softmax, rmsnorm, layernorm) and cross_entropy's chunks against their
      # earlier paths (examples/campaigns/rowwise_<type>.toml for each type of AK_ROWWISE, default
      # all five), each job verified, then timed against PyTorch; in $OUT/rowwise.
      rw=(); for t in ${AK_ROWWISE:-softmax cross_entropy rmsnorm layernorm reduce}; do rw+=(--campaign "$PWD/examples/campaigns/rowwise_$t.toml"); done
      campaign_step rowwise "${AK_ROWWISE_TIMEOUT:-300}" "${rw[@]}" ;;
    flash)
      # flash_attention's Hopper path against its mma.sync path, both types (examples/campaigns/
      # flash_wgmma_hopper.toml and flash_causal_wgmma_hopper.toml), in $OUT/flash.
      campaign_step flash "${AK_FLASH_TIMEOUT:-400}" --campaign "$PWD/examples/campaigns/flash_wgmma_hopper.toml" \
        --campaign "$PWD/examples/campaigns/flash_causal_wgmma_hopper.toml" ;;
    campaign)
      # The campaign files of AK_CAMPAIGNS (space-separated paths), each job verified, then timed
      # against PyTorch, in $OUT/campaign.
      cs=(); for f in ${AK_CAMPAIGNS:?AK_CAMPAIGNS names the campaign files}; do cs+=(--campaign "$(realpath "$f")"); done
      campaign_step campaign "${AK_CAMPAIGN_TIMEOUT:-300}" "${cs[@]}" ;;
    ncu)
      # Profiler evidence (issue 23's goals not met): Nsight Compute on the farm's kernel of each
      # campaign of AK_NCU_CAMPAIGNS (default bench/campaigns/ncu_*.toml, one job each), through a farm
      # whose worker hands ncu's injection to its sandboxes (run --unconfined --inherit-env), its first
      # launch (verification's, at the job's shape); then PyTorch's kernel for the same op and shape
      # (bench/ncu_pytorch.py, a warm launch). --clock-control none: the card's clocks are left alone.
      # Sections: speed of light, compute and memory workload, occupancy, warp states, launch; in $OUT/ncu.
      mkdir -p "$OUT/ncu"
      NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
      sections=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis
        --section Occupancy --section WarpStateStats --section LaunchStats)
      for f in ${AK_NCU_CAMPAIGNS:-bench/campaigns/ncu_*.toml}; do
        n=$(basename "$f" .toml); d="$OUT/ncu/$n"; mkdir -p "$d"
        kt=$(sed -n 's/^kernel_type = "\(.*\)"/\1/p' "$f")
        shape=$(sed -n 's/^shapes = \[\[\(.*\)\]\]/\1/p' "$f" | tr -d ' ')
        dt=$(sed -n 's/^dtypes = \["\([a-z0-9]*\)".*/\1/p' "$f")
        cf=$(realpath "$f")
        (cd "$d" && timeout "${AK_NCU_TIMEOUT:-240}" "$NCU" --target-processes all --clock-control none \
          -k "regex:^ak_$kt\$" --launch-count 1 "${sections[@]}" "$B/bin/autokernel" run --unconfined \
          --inherit-env --backend cuda --campaign "$cf" --data-dir "$d/.ak") > "$d/farm.log" 2>&1
        echo "ncu $n (ak_$kt) rc=$?"; rm -rf "$d/.ak"
        timeout 120 "$NCU" --clock-control none --launch-skip 10 --launch-count 1 "${sections[@]}" \
          python3 bench/ncu_pytorch.py "$kt" "$shape" "$dt" > "$d/pytorch.log" 2>&1
        echo "ncu $n (PyTorch's $kt $shape $dt) rc=$?"
        for log in farm pytorch; do
          echo "--- $n: $log"
          grep -E "^  [A-Za-z_].*\(|Duration|Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per Thread|Eligible|Issued Warp|Executed Ipc|Stall|L2 Hit|==PROF== Profiling|==ERROR==|==WARNING==" "$d/$log.log" | head -45
        done
      done
      tar czf "$OUT/ncu.tgz" -C "$OUT" ncu && rm -rf "$OUT/ncu" ;;
    mlp)
      # fused_mlp's phases on matmul's wgmma paths, TMA included (examples/campaigns/
      # fused_mlp_tma_hopper.toml), in $OUT/mlp.
      campaign_step mlp "${AK_MLP_TIMEOUT:-400}" --campaign "$PWD/examples/campaigns/fused_mlp_tma_hopper.toml" ;;
    wgmma)
      # matmul's Hopper path against its mma.sync path, each job verified, then timed against PyTorch.
      # AK_WGMMA_SHAPES ('[[4096, 4096, 4096]]'), AK_WGMMA_DTYPES ('["fp16"]') and AK_WGMMA_KEEP (an
      # extended regex a config line must match: 'AK_WGMMA = 2') cut the campaign to fit.
      mkdir -p "$OUT/wgmma"
      sed -e "${AK_WGMMA_SHAPES:+s/^shapes = .*/shapes = $AK_WGMMA_SHAPES/}" \
        -e "${AK_WGMMA_DTYPES:+s/^dtypes = .*/dtypes = $AK_WGMMA_DTYPES/}" \
        -E -e "${AK_WGMMA_KEEP:+/^  \{ AK_/{/$AK_WGMMA_KEEP/!d\}}" \
        examples/campaigns/matmul_wgmma_hopper.toml > "$OUT/wgmma/campaign.toml"
      campaign_step wgmma "${AK_WGMMA_TIMEOUT:-400}" --campaign "$OUT/wgmma/campaign.toml" ;;
  esac
done
