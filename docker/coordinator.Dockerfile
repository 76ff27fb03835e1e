# The coordinator and the CLI (no GPU, no libtorch): a CPU-only build without the sandbox, on
# Debian 12. Build from the repository root:
#   docker build -f docker/coordinator.Dockerfile -t autokernel-coordinator .
FROM debian:12-slim AS build
RUN apt-get update && apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build pkg-config \
      libzmq3-dev cppzmq-dev nlohmann-json3-dev libhiredis-dev prometheus-cpp-dev \
      libcli11-dev libtomlplusplus-dev libspdlog-dev libfmt-dev libxxhash-dev libseccomp-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DAK_WITH_CUDA=OFF \
      -DAK_BUILD_SANDBOX=OFF -DAK_BUILD_TESTS=OFF \
    && cmake --build /build --target autokernel \
    && install -D -m 0755 /build/bin/autokernel /opt/autokernel/bin/autokernel

FROM debian:12-slim
RUN apt-get update && apt-get install -y --no-install-recommends \
      libzmq5 libhiredis0.14 libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 \
      libspdlog1.10 libfmt9 libxxhash0 libseccomp2 redis-tools ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /var/lib/autokernel --create-home autokernel \
    && install -d -o autokernel -m 0700 /keys
COPY --from=build /opt/autokernel /opt/autokernel
COPY examples /opt/autokernel/share/autokernel/examples
ENV PATH=/opt/autokernel/bin:$PATH
USER 10001
WORKDIR /var/lib/autokernel
# 5555 workers, 5556 clients (CURVE with keys), 9464 /metrics
EXPOSE 5555 5556 9464
ENTRYPOINT ["autokernel"]
CMD ["coordinator", "--help"]
