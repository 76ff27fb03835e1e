#include "common/rate_limit.h"

#include <string>

#include <gtest/gtest.h>

namespace ak {
namespace {

TEST(PeerRateLimiter, ABurstPassesThenThePeerIsRefusedUntilTokensRefill) {
  PeerRateLimiter limiter({/*rate_per_s=*/10, /*burst=*/3});
  int64_t t = 1'000;
  EXPECT_TRUE(limiter.allow("10.0.0.1", t));
  EXPECT_TRUE(limiter.allow("10.0.0.1", t));
  EXPECT_TRUE(limiter.allow("10.0.0.1", t));
  EXPECT_FALSE(limiter.allow("10.0.0.1", t));
  EXPECT_FALSE(limiter.allow("10.0.0.1", t + 50));  // half a token
  EXPECT_TRUE(limiter.allow("10.0.0.1", t + 100));  // one token after 100 ms at 10/s
  EXPECT_FALSE(limiter.allow("10.0.0.1", t + 100));
}

TEST(PeerRateLimiter, PeersHaveTheirOwnBuckets) {
  PeerRateLimiter limiter({1, 1});
  EXPECT_TRUE(limiter.allow("a", 0));
  EXPECT_FALSE(limiter.allow("a", 0));
  EXPECT_TRUE(limiter.allow("b", 0));
}

TEST(PeerRateLimiter, AQuietPeerGetsNoMoreThanTheBurst) {
  PeerRateLimiter limiter({1000, 2});
  EXPECT_TRUE(limiter.allow("a", 0));
  int allowed = 0;
  for (int i = 0; i < 10; ++i) allowed += limiter.allow("a", 3'600'000) ? 1 : 0;
  EXPECT_EQ(allowed, 2);
}

TEST(PeerRateLimiter, ManyPeersCostBoundedMemory) {
  PeerRateLimiter limiter({1, 1, /*max_keys=*/100});
  for (int i = 0; i < 10'000; ++i) limiter.allow("peer-" + std::to_string(i), i);
  EXPECT_LE(limiter.peers(), 100u);
  // The newest peer's bucket survived the evictions: it is still empty.
  EXPECT_FALSE(limiter.allow("peer-9999", 9'999));
}

TEST(LogThrottle, OneLinePerKeyPerIntervalWithTheCountOfTheRest) {
  LogThrottle log(1'000);
  EXPECT_EQ(log.admit("a", 0), 0);
  EXPECT_EQ(log.admit("a", 10), std::nullopt);
  EXPECT_EQ(log.admit("a", 999), std::nullopt);
  EXPECT_EQ(log.admit("b", 999), 0);  // another key logs at once
  EXPECT_EQ(log.admit("a", 1'000), 2);
  EXPECT_EQ(log.admit("a", 1'500), std::nullopt);
  EXPECT_EQ(log.admit("a", 2'000), 1);
}

TEST(LogThrottle, ManyKeysCostBoundedMemoryAndStillLog) {
  LogThrottle log(1'000'000, 50);
  int logged = 0;
  for (int i = 0; i < 5'000; ++i) logged += log.admit("k" + std::to_string(i), i) ? 1 : 0;
  EXPECT_EQ(logged, 5'000);  // every key is new
  EXPECT_EQ(log.admit("k4999", 5'000), std::nullopt);
}

}  // namespace
}  // namespace ak
