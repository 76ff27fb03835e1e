// Runs against the real driver; skips where the machine has no GPU (CTest label `gpu`).
#include <gtest/gtest.h>

#include "tests/gpu_present.h"
#include "worker/device.h"

namespace ak {
namespace {

TEST(DetectGpusOnDevice, ReportsEveryLocalGpuWithRealArchitecture) {
  if (!testing::gpu_present()) GTEST_SKIP() << testing::kNoGpu;
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
