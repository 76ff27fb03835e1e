// common/hash.h: the values are persisted (result hashes in Redis, compile cache file names,
// KernelBench problem hashes), so these constants must never change.
#include "common/hash.h"

#include <gtest/gtest.h>

namespace ak {
namespace {

TEST(Hash, Xxh64HexGivesThePersistedValues) {
  EXPECT_EQ(xxh64_hex(""), "ef46db3751d8e999");
  EXPECT_EQ(xxh64_hex("abc"), "44bc2cf5ad770999");
}

TEST(Hash, Xxh64HexKeepsLeadingZeros) { EXPECT_EQ(xxh64_hex("k20"), "004541b87408e056"); }

TEST(Hash, Xxh64TakesASeed) {
  EXPECT_EQ(xxh64("job-1", 0x5eed), 0xafe906eee3d68789ull);
  EXPECT_NE(xxh64("job-1", 0x5eed), xxh64("job-1"));
}

}  // namespace
}  // namespace ak
