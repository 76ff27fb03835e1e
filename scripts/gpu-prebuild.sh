#!/usr/bin/env bash
# Installs this checkout's build (build/, made by scripts/setup.sh) as a stripped, relocatable tree
# for a GPU host that should not spend its time compiling (about 8 MB: bin/, lib/, share/):
#   scripts/gpu-prebuild.sh .gpu-prebuilt
# then, there, AK_GPU_PREBUILT=.gpu-prebuilt scripts/gpu-session.sh DEBS_DIR with steps that need
# no build tree (flash, rowwise, wgmma, models, pipeline, study, dashboards, ...; not ctest).
# The GPU host must have the same torch version (libtorch is not copied) and the .debs' libraries
# (scripts/fetch-gpu-debs.sh); spdlog's and fmt's are copied into DIR/lib.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:?usage: gpu-prebuild.sh DIR}
ninja -C build autokernel autokernel-sandbox autokernel-nvrtc autokernel_ops
rm -rf "$DIR"
cmake --install build --prefix "$DIR" --strip > /dev/null
# Libraries the GPU host's .debs (scripts/fetch-gpu-debs.sh) may lack at run time: spdlog and fmt.
for lib in $(ldd "$DIR/bin/autokernel" | awk '/libspdlog|libfmt/ {print $3}'); do cp -L "$lib" "$DIR/lib/"; done
du -sh "$DIR"
