// ChildProcess: stop() ends a child that honours SIGTERM within the grace period, and kills one
// that ignores it once the grace runs out. The READY line is the handshake: the shell prints it
// only after installing its trap, so the test never races the child's start-up.
#include "common/process.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>

namespace ak {
namespace {

using namespace std::chrono;

ChildProcess spawn_ready(const std::string& script) {
  ChildProcess::Options o;
  o.capture_stdout = true;
  auto c = ChildProcess::spawn({"/bin/sh", "-c", script}, o);
  EXPECT_TRUE(c.ok()) << c.status().message();
  auto line = c->wait_for_line("READY", seconds(10));
  EXPECT_TRUE(line.ok()) << line.status().message();
  return std::move(*c);
}

TEST(ChildProcess, StopEndsAChildThatHonoursSigtermWithoutWaitingOutTheGrace) {
  ChildProcess c = spawn_ready("trap 'exit 7' TERM; echo READY; while :; do sleep 1; done");
  const auto t0 = steady_clock::now();
  const int code = c.stop(seconds(20));
  const auto took = duration_cast<milliseconds>(steady_clock::now() - t0);
  EXPECT_EQ(code, 7);
  EXPECT_LT(took, seconds(10)) << "stop waited out the grace period instead of the exit";
  EXPECT_FALSE(c.running());
}

TEST(ChildProcess, StopKillsAChildThatIgnoresSigtermAfterTheGrace) {
  ChildProcess c = spawn_ready("trap '' TERM; echo READY; while :; do sleep 1; done");
  const auto t0 = steady_clock::now();
  const int code = c.stop(milliseconds(300));
  const auto took = duration_cast<milliseconds>(steady_clock::now() - t0);
  EXPECT_EQ(code, 128 + SIGKILL);
  EXPECT_GE(took, milliseconds(250));  // poll() rounds its timeout to whole ms
  EXPECT_FALSE(c.running());
}

}  // namespace
}  // namespace ak
