#!/usr/bin/env bash
# Two minutes of garbage on both coordinator ports (issue 19, "Must show"): a real redis-server,
# coordinator and CPU worker, and ak_fuzz_peers sending random bytes, deeply nested JSON and
# oversized frames to the worker and client ports. Prints the coordinator's VmRSS before and
# after (and its peak), then checks that it still answers STATUS and runs a campaign to the end.
# Fails when RSS grew by 100 MB or more.
#   bench/fuzz.sh [SECONDS]   (default 120; build dir: $BUILD or ./build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
seconds=${1:-120}
cmake --build "$build" -j2 --target fuzz_farm_test ak_fuzz_peers autokernel >/dev/null
log=$(mktemp)
rc=0
AK_FUZZ_SECONDS=$seconds "$build/bin/fuzz_farm_test" --gtest_color=no >"$log" 2>&1 || rc=$?
grep -E "coordinator VmRSS|fuzz:|OK \]|FAILED|Failure|grew" "$log" || cat "$log"
rm -f "$log"
exit "$rc"
