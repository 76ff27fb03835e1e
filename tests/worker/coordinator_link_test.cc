#include "worker/coordinator_link.h"

#include <gtest/gtest.h>

namespace ak {
namespace {

CoordinatorLink::Options options() { return {3'000, 15'000}; }

TEST(CoordinatorLinkTest, AWorkerThatNeverConnectsWarnsAfterTheDelayNamingTheAddressAndTheReason) {
  CoordinatorLink link("tcp://10.0.0.9:5555", options(), 1'000);
  link.failed(1'100, "no TCP connection");
  EXPECT_FALSE(link.due_warning(3'999).has_value());
  auto w = link.due_warning(4'000);
  ASSERT_TRUE(w.has_value());
  EXPECT_NE(w->find("cannot reach coordinator tcp://10.0.0.9:5555 for 3 s"), std::string::npos) << *w;
  EXPECT_NE(w->find("no TCP connection"), std::string::npos) << *w;
}

TEST(CoordinatorLinkTest, TheWarningRepeatsOncePerIntervalWhileTheLinkIsDown) {
  CoordinatorLink link("tcp://c:5555", options(), 0);
  int warnings = 0;
  for (int64_t t = 0; t <= 60'000; t += 100) warnings += link.due_warning(t).has_value();
  EXPECT_EQ(warnings, 4);  // at 3, 18, 33 and 48 s
  EXPECT_EQ(link.next_warning_ms(), 63'000);
}

TEST(CoordinatorLinkTest, AConnectedLinkSaysNothingAndALinkBackAfterAWarningSaysSoOnce) {
  CoordinatorLink link("tcp://c:5555", options(), 0);
  link.connected(500);
  EXPECT_FALSE(link.due_warning(10'000).has_value());
  EXPECT_FALSE(link.take_recovery().has_value()) << "no warning was given, so no recovery line";
  EXPECT_FALSE(link.next_warning_ms().has_value());

  link.failed(20'000, "the connection ended or no heartbeat was answered");
  EXPECT_FALSE(link.due_warning(22'999).has_value());
  auto w = link.due_warning(23'000);
  ASSERT_TRUE(w.has_value());
  EXPECT_NE(w->find("no heartbeat was answered"), std::string::npos) << *w;
  link.connected(25'000);
  auto back = link.take_recovery();
  ASSERT_TRUE(back.has_value());
  EXPECT_NE(back->find("again after 5 s"), std::string::npos) << *back;
  EXPECT_FALSE(link.take_recovery().has_value());
}

TEST(CoordinatorLinkTest, FailuresWhileDownKeepTheFirstDownTimeAndTheLatestReason) {
  CoordinatorLink link("tcp://c:5555", options(), 0);
  link.failed(1'000, "no TCP connection");
  link.failed(2'000, "the coordinator refused this worker's CURVE key");
  auto w = link.due_warning(3'000);
  ASSERT_TRUE(w.has_value());
  EXPECT_NE(w->find("for 3 s (the coordinator refused"), std::string::npos) << *w;
}

}  // namespace
}  // namespace ak

namespace ak {
namespace {

// A refused key shows as a failed handshake, then the disconnect that ends it: the warning must
// name the refusal, not the disconnect. A later connection clears it.
TEST(CoordinatorLinkTest, ARefusedHandshakeIsNotHiddenByTheDisconnectThatFollowsIt) {
  CoordinatorLink link("tcp://coordinator:5555", {}, 0);
  link.failed(500, "the coordinator refused this worker's CURVE key", /*handshake=*/true);
  link.failed(600, "the connection ended or no heartbeat was answered");
  auto w = link.due_warning(3'000);
  ASSERT_TRUE(w.has_value());
  EXPECT_NE(w->find("refused this worker's CURVE key"), std::string::npos) << *w;
  link.connected(4'000);
  link.failed(5'000, "the connection ended or no heartbeat was answered");
  w = link.due_warning(8'000);
  ASSERT_TRUE(w.has_value());
  EXPECT_NE(w->find("the connection ended"), std::string::npos) << *w;
}

}  // namespace
}  // namespace ak
