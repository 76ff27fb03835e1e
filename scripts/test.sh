#!/usr/bin/env bash
# Set up, build, and run the whole test suite: unit tests, integration tests with a real
# redis-server and real coordinator and worker processes, and GPU tests (label `gpu`, which skip
# where there is no GPU). Extra arguments go to ctest (e.g. -L gpu, -R Farm).
set -euo pipefail
cd "$(dirname "$0")/.."
AK_WITH_TRANSFORMERS=${AK_WITH_TRANSFORMERS:-1} bash scripts/setup.sh
cd "${AK_BUILD_DIR:-build}"
ctest --output-on-failure -j 2 "$@"
