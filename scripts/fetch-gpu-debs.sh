#!/usr/bin/env bash
# Downloads every Debian package that scripts/gpu-session.sh unpacks on a GPU host without package
# access (that host has its own CUDA, PyTorch, cmake and ninja): ZeroMQ, hiredis, prometheus-cpp,
# Redis, and the build's other libraries (spdlog, fmt, CLI11, toml++, xxhash, nlohmann-json,
# googletest, Google Benchmark, libseccomp), and Prometheus for the live dashboards test
# (tests/dashboards: every panel's query against a farm with a cuda worker).
#   scripts/fetch-gpu-debs.sh DEST      (e.g. an ignored .gpu-deps/, then carried to the GPU host)
set -eu
dest=${1:?usage: fetch-gpu-debs.sh DEST}
mkdir -p "$dest"
cd "$dest"
pkgs="libzmq3-dev libzmq5 cppzmq-dev libsodium23 libsodium-dev libpgm-5.3-0 libnorm1
      libhiredis-dev libhiredis0.14
      prometheus-cpp-dev libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 libprometheus-cpp-push1.0
      civetweb libcivetweb1 libcivetweb-dev
      redis-server redis-tools libjemalloc2 liblzf1
      libspdlog-dev libspdlog1.10 libfmt-dev libfmt9 libcli11-dev libtomlplusplus-dev libtomlplusplus3
      libxxhash-dev libxxhash0 nlohmann-json3-dev libgtest-dev libgmock-dev googletest
      libbenchmark-dev libbenchmark1debian libseccomp-dev libseccomp2 prometheus"
[ -n "$(ls /var/lib/apt/lists 2>/dev/null | grep -v lock | head -n 1)" ] || apt-get update -qq
# apt-get download writes into the current folder; the _apt sandbox user may lack rights to it.
apt-get -o APT::Sandbox::User=root download $pkgs
ls -1 "$PWD"/*.deb | wc -l
