#!/usr/bin/env bash
# Installs this checkout's build (build/, made by scripts/setup.sh) as a stripped, relocatable tree
# for a GPU host that should not spend its time compiling (about 8 MB: bin/, lib/, share/):
#   scripts/gpu-prebuild.sh .gpu-prebuilt
# then, there, AK_GPU_PREBUILT=.gpu-prebuilt scripts/gpu-session.sh DEBS_DIR with steps that need
# no build tree (flash, rowwise, wgmma, models, pipeline, study, ...; not ctest or dashboards).
# The GPU host must have the same torch version (libtorch is not copied) and the .debs' libraries.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:?usage: gpu-prebuild.sh DIR}
ninja -C build autokernel autokernel-sandbox autokernel-nvrtc autokernel_ops
rm -rf "$DIR"
cmake --install build --prefix "$DIR" --strip > /dev/null
du -sh "$DIR"
