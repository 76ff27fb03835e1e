// The built-in candidates on a GPU (label gpu): the harness in candidate mode, backend triton,
// device cuda:0, KernelBench's correctness trials against the problem's Model. Fails where torch
// does not import; skips where the machine has no GPU; fails where it has one that torch does not
// see.
#include <gtest/gtest.h>

#include "tests/gpu_present.h"
#include "tests/kernelbench/builtin_fixture.h"

namespace ak::kernelbench::testing {
namespace {

class BuiltinGpuTest : public BuiltinFixture {
 protected:
  void SetUp() override {
    BuiltinFixture::SetUp();
    // Exit 3: torch imports but sees no CUDA device. A failed import exits 1 with its traceback.
    auto [rc, out] =
        run({AK_PYTHON, "-c", "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 3)"}, {},
            std::chrono::seconds(120));
    ASSERT_TRUE(rc == 0 || rc == 3) << AK_PYTHON << " could not import torch (exit " << rc << "): " << out;
    if (!ak::testing::gpu_present()) GTEST_SKIP() << ak::testing::kNoGpu;
    ASSERT_EQ(rc, 0) << "this machine has a GPU, but torch in " << AK_PYTHON << " sees no CUDA device";
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
