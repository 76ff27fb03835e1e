#!/usr/bin/env bash
# Set up, build, and run the main job: the default softmax campaign on every local GPU, or on the
# CPU backend where there is none. Writes results.tsv and results.json here. Extra arguments go
# to `autokernel run` (see `build/bin/autokernel run --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec "${AK_BUILD_DIR:-build}/bin/autokernel" run "$@"
