# A GPU worker: the farm built with its cuda and triton backends on NVIDIA's CUDA 13 image, with
# PyTorch 2.11 (the sandbox's libtorch and the Python of Triton, KernelBench and model jobs).
# NVRTC and the toolkit's headers are needed at run time (candidates are compiled on the worker),
# hence the devel image. Build from the repository root:
#   docker build -f docker/worker.Dockerfile -t autokernel-worker .
# Run with the GPUs (docker run --gpus all, or the Compose file / Kubernetes manifests here).
FROM nvidia/cuda:13.0.1-devel-ubuntu24.04
RUN apt-get update && apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build pkg-config python3-venv python3-dev \
      libzmq3-dev cppzmq-dev nlohmann-json3-dev libhiredis-dev prometheus-cpp-dev \
      libcli11-dev libtomlplusplus-dev libspdlog-dev libfmt-dev libxxhash-dev libseccomp-dev \
    && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir --index-url https://download.pytorch.org/whl/cu130 \
         torch==2.11.0 \
    && /opt/venv/bin/pip install --no-cache-dir numpy==2.3.5 pyarrow==26.0.1
WORKDIR /src
COPY . .
RUN TORCH_PREFIX="$(/opt/venv/bin/python -c 'import torch; print(torch.utils.cmake_prefix_path)')" \
    && cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DAK_BUILD_TESTS=OFF \
         -DAK_PYTHON=/opt/venv/bin/python -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" \
    && cmake --build /build \
    && cmake --install /build --prefix /opt/autokernel \
    && rm -rf /build
ENV PATH=/opt/autokernel/bin:/usr/local/cuda/bin:$PATH \
    AK_PYTHON=/opt/venv/bin/python
WORKDIR /var/lib/autokernel
# 9465 /metrics (the worker connects out to the coordinator; it listens for nothing else)
EXPOSE 9465
ENTRYPOINT ["autokernel"]
CMD ["worker", "--help"]
