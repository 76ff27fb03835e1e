#include "worker/cuda_driver.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ak {
namespace {

// The dynamic shared memory of a launch beside the kernel's static shared memory: the limit is set
// before the first launch that asks for any (the driver's default is 48 KiB less the static part,
// so 48 KiB of stages beside 1 KiB of barriers failed with CUDA_ERROR_INVALID_VALUE on an H100),
// raised when a launch asks for more, and a launch beyond the block's opt-in limit, static part
// included, is refused without a call.
int g_static_bytes = 0;
std::vector<int> g_limits_set;
CUresult static_size(int* v, CUfunction_attribute a, CUfunction) {
  if (a != CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES) return CUDA_ERROR_INVALID_VALUE;
  *v = g_static_bytes;
  return CUDA_SUCCESS;
}
CUresult set_limit(CUfunction, CUfunction_attribute a, int v) {
  if (a != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) return CUDA_ERROR_INVALID_VALUE;
  g_limits_set.push_back(v);
  return CUDA_SUCCESS;
}

TEST(GrantDynamicShared, TheLimitIsSetBeforeTheFirstLaunchThatAsksForAnyAndCountsTheStaticPart) {
  CudaDriver d{};
  d.cuFuncGetAttribute = static_size;
  d.cuFuncSetAttribute = set_limit;
  g_static_bytes = 1024;
  g_limits_set.clear();
  unsigned granted = 0;
  const int optin = 227 * 1024;
  ASSERT_TRUE(grant_dynamic_shared(d, nullptr, 0, optin, granted).ok());
  EXPECT_TRUE(g_limits_set.empty()) << "no dynamic shared memory, nothing to set";
  ASSERT_TRUE(grant_dynamic_shared(d, nullptr, 48 * 1024, optin, granted).ok());
  EXPECT_EQ(g_limits_set, std::vector<int>{48 * 1024}) << "48 KiB beside 1 KiB static is over the default";
  EXPECT_EQ(granted, 48u * 1024);
  ASSERT_TRUE(grant_dynamic_shared(d, nullptr, 32 * 1024, optin, granted).ok());
  ASSERT_TRUE(grant_dynamic_shared(d, nullptr, 48 * 1024, optin, granted).ok());
  EXPECT_EQ(g_limits_set.size(), 1u) << "set once for what was granted already";
  ASSERT_TRUE(grant_dynamic_shared(d, nullptr, 226 * 1024, optin, granted).ok());
  EXPECT_EQ(g_limits_set.back(), 226 * 1024);
  const Status over = grant_dynamic_shared(d, nullptr, 226 * 1024 + 1, optin, granted);
  EXPECT_FALSE(over.ok());
  EXPECT_NE(over.message().find("(232448 B): 231425 B dynamic beside 1024 B static"), std::string::npos)
      << over.message();
  EXPECT_EQ(g_limits_set.size(), 2u) << "refused without a call";
  EXPECT_EQ(granted, 226u * 1024);
}

}  // namespace
}  // namespace ak
