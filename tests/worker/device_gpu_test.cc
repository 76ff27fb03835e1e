// Runs against the real driver; skips where there is none (CTest label `gpu`).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include "worker/device.h"

namespace ak {
namespace {

TEST(DetectGpusOnDevice, ReportsEveryLocalGpuWithRealArchitecture) {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) GTEST_SKIP() << "no NVIDIA driver (libcuda.so.1) on this machine";
  dlclose(h);
  auto gpus = detect_gpus();
  ASSERT_TRUE(gpus.ok()) << gpus.status().to_string();
  ASSERT_FALSE(gpus->empty());
  for (const Capabilities& c : *gpus) {
    std::cout << c.device_index << ": " << c.gpu_name << " pci " << c.pci_id << " (" << c.pci_device_id
              << ") cc " << c.compute_capability << " " << c.arch << ", " << c.sm_count << " SMs, "
              << (c.memory_bytes >> 20) << " MiB\n";
    EXPECT_FALSE(c.gpu_name.empty());
    EXPECT_EQ(c.arch.rfind("sm_", 0), 0u) << c.arch;
    EXPECT_GT(c.sm_count, 0);
    EXPECT_GT(c.memory_bytes, 0);
    EXPECT_FALSE(c.pci_id.empty());
    if (c.compute_capability == "9.0") {
      EXPECT_EQ(c.arch, "sm_90a");
    }
  }
}

}  // namespace
}  // namespace ak
