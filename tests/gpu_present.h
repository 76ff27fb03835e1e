// Whether this machine has an NVIDIA GPU, asked independently of the code under test, so that a
// GPU test skips only where there is no GPU and fails where there is one that the code cannot use
// (a sandbox that cannot set up, a torch that sees no device). Tests of the label `gpu` use it.
#pragma once

#include <dlfcn.h>

#include <filesystem>

namespace ak::testing {

// A device node, or a device that the driver counts.
inline bool gpu_present() {
  if (std::filesystem::exists("/dev/nvidia0")) return true;
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) return false;
  auto init = reinterpret_cast<int (*)(unsigned)>(dlsym(h, "cuInit"));
  auto count = reinterpret_cast<int (*)(int*)>(dlsym(h, "cuDeviceGetCount"));
  int n = 0;
  // The library stays loaded: a driver once initialised is not unloaded.
  return init && count && init(0) == 0 && count(&n) == 0 && n > 0;
}

inline constexpr const char* kNoGpu =
    "no NVIDIA GPU on this machine (no /dev/nvidia0, no device from libcuda.so.1); GPU test skipped";

}  // namespace ak::testing
