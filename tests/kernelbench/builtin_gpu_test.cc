// The built-in candidates on a GPU (label gpu): the harness in candidate mode, backend triton,
// device cuda:0, KernelBench's correctness trials against the problem's Model. Skips where torch
// sees no CUDA device.
#include <gtest/gtest.h>

#include "tests/kernelbench/builtin_fixture.h"

namespace ak::kernelbench::testing {
namespace {

class BuiltinGpuTest : public BuiltinFixture {
 protected:
  void SetUp() override {
    BuiltinFixture::SetUp();
    auto [rc, out] =
        run({AK_PYTHON, "-c", "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 3)"}, {},
            std::chrono::seconds(120));
    if (rc != 0) GTEST_SKIP() << "no CUDA device for torch (" << AK_PYTHON << " exit " << rc << "); GPU test skipped";
  }
};

TEST_F(BuiltinGpuTest, GeneratedCandidatesAreCorrectOnTheGpuInEveryPrecision) {
  for (const char* precision : {"fp32", "fp16", "bf16"}) {
    for (int id : {23, 40, 8, 95}) {
      SCOPED_TRACE(std::string(precision) + " problem " + std::to_string(id));
      const nlohmann::json r = harness(id, precision, "cuda:0", {}, true);
      ASSERT_TRUE(r.is_object());
      EXPECT_EQ(r.value("verdict", ""), "correct") << r.dump(2);
      EXPECT_EQ(r.value("timer", ""), "cuda_event");
      EXPECT_EQ(r["strict"]["static_scan"]["errors"], nlohmann::json::array()) << r["strict"].dump(2);
    }
  }
}

}  // namespace
}  // namespace ak::kernelbench::testing
