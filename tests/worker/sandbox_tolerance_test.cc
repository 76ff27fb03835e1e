// tests for worker/sandbox/tolerance.h: the comparison every verification stage applies.
#include "worker/sandbox/tolerance.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

namespace ak::sandbox {
namespace {

// One element per entry, fp32 as the harness compares them.
at::Tensor values(std::vector<float> v) { return at::tensor(v, at::kFloat); }

bool all_ok(const Comparison& c) { return c.ok.all().item<bool>(); }

TEST(SandboxTolerance, SmallestNormalsAreThoseOfEachDtype) {
  EXPECT_EQ(smallest_normal(at::kFloat), 0x1p-126);
  EXPECT_EQ(smallest_normal(at::kBFloat16), 0x1p-126);
  EXPECT_EQ(smallest_normal(at::kHalf), 0x1p-14);
}

// The case found on the H200: fp32 flash_attention at 1x32x8192x128, hostile set large_logits,
// where the tolerance scale (P @ |v|) was as tiny as the reference.
TEST(SandboxTolerance, ZeroPassesWhereTheFp32ReferenceIsSubnormal) {
  const at::Tensor ref = values({-2.28e-42f});
  const at::Tensor scale = values({2.28e-42f});
  EXPECT_TRUE(all_ok(compare_with_tolerance(values({0.0f}), ref, at::kFloat, {1e-4, 1e-6}, scale)));
}

TEST(SandboxTolerance, ZeroPassesWhereTheReferenceIsBelowEachDtypesSmallestNormal) {
  for (at::ScalarType d : {at::kFloat, at::kBFloat16, at::kHalf}) {
    const float below = float(0.5 * smallest_normal(d));
    const at::Tensor ref = values({below, -below}).to(d).to(at::kFloat);  // as the dtype holds it
    const at::Tensor scale = values({0.0f, 0.0f});                        // e.g. attention weights that underflowed
    EXPECT_TRUE(all_ok(compare_with_tolerance(values({0.0f, -0.0f}), ref, d, {1e-6, 1e-6}, scale))) << d;
    EXPECT_TRUE(all_ok(compare_with_tolerance(values({0.0f, 0.0f}), ref, d, {0.0, 0.0}))) << d;
  }
}

TEST(SandboxTolerance, ZeroStillFailsWhereTheReferenceIsTheSmallestNormalOrAbove) {
  for (at::ScalarType d : {at::kFloat, at::kBFloat16, at::kHalf}) {
    const float normal = float(smallest_normal(d));
    const at::Tensor ref = values({normal, -2 * normal});
    const Comparison c = compare_with_tolerance(values({0.0f, 0.0f}), ref, d, {0.0, 1e-3});
    EXPECT_FALSE(c.ok[0].item<bool>()) << d;
    EXPECT_FALSE(c.ok[1].item<bool>()) << d;
  }
}

TEST(SandboxTolerance, AnOutputFarFromZeroStillFailsWhereTheReferenceIsSubnormal) {
  for (at::ScalarType d : {at::kFloat, at::kBFloat16, at::kHalf}) {
    const float below = float(0.5 * smallest_normal(d));
    const Comparison c = compare_with_tolerance(values({1.0f, -below * 4}), values({below, below}), d, {0.0, 1e-6});
    EXPECT_FALSE(c.ok[0].item<bool>()) << d;
    EXPECT_FALSE(c.ok[1].item<bool>()) << d;
  }
}

TEST(SandboxTolerance, NaNAndInfinityMustBeMatchedExactly) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Comparison c = compare_with_tolerance(values({nan, inf, -inf, 0.0f, nan}), values({nan, inf, inf, nan, 0.0f}),
                                              at::kFloat, {1.0, 1.0});
  EXPECT_TRUE(c.ok[0].item<bool>());
  EXPECT_TRUE(c.ok[1].item<bool>());
  EXPECT_FALSE(c.ok[2].item<bool>());
  EXPECT_FALSE(c.ok[3].item<bool>());
  EXPECT_FALSE(c.ok[4].item<bool>());
}

}  // namespace
}  // namespace ak::sandbox
