// The process-wide stop request (common/stop_signal.h): what the first SIGTERM or SIGINT records.
#include "common/stop_signal.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>

namespace ak {
namespace {

using std::chrono::steady_clock;

// One test, since the flag is set once per process and never reset.
TEST(StopSignal, TheFirstSignalSetsTheFlagAndRecordsItsNumberAndTimeAndASecondChangesNeither) {
  install_stop_signal_handlers();
  EXPECT_FALSE(stop_flag().load());
  EXPECT_EQ(stop_signal_number(), 0);
  EXPECT_FALSE(stop_signal_time().has_value());

  const auto before = steady_clock::now();
  ASSERT_EQ(raise(SIGTERM), 0);  // the handler has run when raise returns
  const auto after = steady_clock::now();
  EXPECT_TRUE(stop_flag().load());
  EXPECT_EQ(stop_signal_number(), SIGTERM);
  const auto when = stop_signal_time();
  ASSERT_TRUE(when.has_value());
  // Recorded to the millisecond, truncated: up to 1 ms before `before`.
  EXPECT_GE(*when, before - std::chrono::milliseconds(1));
  EXPECT_LE(*when, after);

  ASSERT_EQ(raise(SIGINT), 0);  // no exit_on_second_stop_signal(): the process goes on
  EXPECT_EQ(stop_signal_number(), SIGTERM);
  EXPECT_EQ(stop_signal_time(), when);
}

}  // namespace
}  // namespace ak
