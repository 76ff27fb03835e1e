// ChildProcess: stop() ends a child that honours SIGTERM within the grace period, and kills one
// that ignores it once the grace runs out. The READY line is the handshake: the shell prints it
// only after installing its trap, so the test never races the child's start-up.
#include "common/process.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

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

// pipe_stdin: lines written reach the child's stdin; once the child is gone a write is an error,
// not a SIGPIPE that ends this process.
TEST(ChildProcess, WriteLineFeedsTheChildsStdinAndFailsCleanlyOnceItIsGone) {
  ChildProcess::Options o;
  o.capture_stdout = true;
  o.pipe_stdin = true;
  auto c = ChildProcess::spawn({"/bin/sh", "-c", "read a; echo got $a; read b; echo got $b"}, o);
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_TRUE(c->write_line("one").ok());
  auto line = c->wait_for_line("got ", seconds(10));
  ASSERT_TRUE(line.ok()) << line.status().message();
  EXPECT_EQ(*line, "one");
  ASSERT_TRUE(c->write_line("two").ok());
  line = c->wait_for_line("got ", seconds(10));
  ASSERT_TRUE(line.ok()) << line.status().message();
  EXPECT_EQ(*line, "two");
  EXPECT_EQ(c->wait(), 0);
  EXPECT_FALSE(c->write_line("three").ok());  // EPIPE: the reader has gone
  ChildProcess plain = spawn_ready("echo READY");
  EXPECT_FALSE(plain.write_line("x").ok());  // no pipe to write to
}

}  // namespace
}  // namespace ak

namespace ak {
namespace {

TEST(ChildProcessWaitFor, ReturnsTheExitCodeOfAChildThatEndsInTime) {
  auto c = ChildProcess::spawn({"sh", "-c", "exit 3"}, {});
  ASSERT_TRUE(c.ok());
  auto rc = c->wait_for(std::chrono::seconds(30));
  ASSERT_TRUE(rc.has_value());
  EXPECT_EQ(*rc, 3);
}

TEST(ChildProcessWaitFor, LeavesARunningChildRunningAtTheDeadlineAndKillGroupEndsItsGroup) {
  const std::string out = "/tmp/ak-process-test-" + std::to_string(getpid()) + ".log";
  struct Remove {
    std::string path;
    ~Remove() { std::remove(path.c_str()); }
  } remove_log{out};
  ChildProcess::Options o;
  o.new_process_group = true;
  o.capture_stdout = true;
  o.output_path = out;  // stderr, with stdout captured
  // A shell that starts a grandchild in the same group, says its pid (after a line to stderr, so
  // that line is in the file once the pid is read) and waits for it.
  auto c = ChildProcess::spawn({"sh", "-c", "echo started >&2; sleep 300 & echo $!; wait"}, o);
  ASSERT_TRUE(c.ok());
  auto line = c->read_line(std::chrono::seconds(30));
  ASSERT_TRUE(line.ok() && line->has_value()) << "the shell never printed the grandchild's pid";
  const pid_t grandchild = std::stoi(**line);
  // Opened while it surely lives; readable once it has exited (a zombie waiting for init counts).
  const int fd = static_cast<int>(syscall(SYS_pidfd_open, grandchild, 0));
  ASSERT_GE(fd, 0) << "pidfd_open(" << grandchild << "): errno " << errno;
  EXPECT_FALSE(c->wait_for(std::chrono::milliseconds(200)).has_value());
  EXPECT_TRUE(c->running());
  EXPECT_EQ(c->kill_group(), 128 + SIGKILL);
  // SIGKILL reached the grandchild too; it dies when next scheduled, not inside kill().
  pollfd p{fd, POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 10000), 1) << "grandchild " << grandchild << " still alive 10 s after kill_group";
  close(fd);
  std::ifstream in(out);
  std::string first;
  std::getline(in, first);
  EXPECT_EQ(first, "started") << "stderr went to output_path";
}

TEST(RemoveLeftovers, RemovesWhatADeadProcessLeftAndKeepsTheRest) {
  namespace fs = std::filesystem;
  std::string tmpl = (fs::temp_directory_path() / "ak-leftovers-XXXXXX").string();
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  const fs::path root = tmpl;
  // A pid that surely existed and is gone: a child that has ended and been reaped.
  auto c = ChildProcess::spawn({"sh", "-c", "exit 0"}, {});
  ASSERT_TRUE(c.ok());
  const std::string dead = std::to_string(c->pid());
  ASSERT_EQ(c->wait(), 0);
  const std::string alive = std::to_string(getpid());
  for (const std::string& name : {"ak-sandbox-" + dead + "-a1b2", "ak-sandbox-" + alive + "-c3d4",
                                  "ak-sandbox-" + dead, "ak-sandbox-x-" + dead, "other-" + dead + "-e5"}) {
    fs::create_directories(root / name / "sub");
    std::ofstream(root / name / "sub" / "f") << "x";
  }
  EXPECT_EQ(remove_leftovers_of_dead_processes(root.string(), "ak-sandbox-"), 1);
  EXPECT_FALSE(fs::exists(root / ("ak-sandbox-" + dead + "-a1b2")));
  for (const std::string& kept : {"ak-sandbox-" + alive + "-c3d4", "ak-sandbox-" + dead, "ak-sandbox-x-" + dead,
                                  "other-" + dead + "-e5"})
    EXPECT_TRUE(fs::exists(root / kept)) << kept;
  // A folder that does not exist is nothing to clean.
  EXPECT_EQ(remove_leftovers_of_dead_processes((root / "none").string(), ""), 0);
  fs::remove_all(root);
}

}  // namespace
}  // namespace ak
