// ChildProcess and SpawnOptions: each option does what common/process.h promises. Readiness is a
// handshake (a READY line the child prints once set up, or a line it echoes back), never a sleep.
#include "common/process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

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

namespace ak {
namespace {

using namespace std::chrono;

// A pidfd of `pid`, readable once it has exited; opened while the process surely lives.
int pidfd_of(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }

// A file under the test's temporary directory, removed at the end of the test.
struct TempFile {
  std::string path = (std::filesystem::temp_directory_path() /
                      ("ak-process-test-" + std::to_string(getpid()) + "-" + std::to_string(counter++)))
                         .string();
  ~TempFile() { std::remove(path.c_str()); }
  static inline int counter = 0;
};

std::string first_line(ChildProcess& c) {
  auto line = c.read_line(seconds(30));
  if (!line.ok()) return "error: " + line.status().message();
  if (!line->has_value()) return "timeout";
  return **line;
}

// A shell in a process group of its own that starts `sleep 300` in that group, prints its pid and
// exits (after which the sleep is nobody's child but init's). The pid is 0 when it was not read.
struct Orphan {
  ChildProcess shell;
  pid_t pid = 0;
  Orphan() = default;
  Orphan(ChildProcess c) : shell(std::move(c)) {}
  Orphan(Orphan&&) = default;
  ~Orphan() { shell.kill_group(); }  // the sleep goes with the test, whatever it asserted
};
Orphan spawn_orphan() {
  SpawnOptions o;
  o.new_process_group = true;
  o.capture_stdout = true;
  auto c = ChildProcess::spawn({"/bin/sh", "-c", "sleep 300 & echo $!"}, o);
  EXPECT_TRUE(c.ok()) << c.status().message();
  if (!c.ok()) return {};
  Orphan out(std::move(*c));
  const std::string line = first_line(out.shell);
  out.pid = std::atoi(line.c_str());
  EXPECT_GT(out.pid, 1) << line;
  if (out.pid <= 1) out.pid = 0;
  return out;
}

TEST(SpawnOptions, AProgramThatCannotBeExecutedIsAnErrorNamingItNotAnExitCode) {
  auto c = ChildProcess::spawn({"/nonexistent/ak-program"}, {});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(c.status().message().find("cannot execute '/nonexistent/ak-program'"), std::string::npos)
      << c.status().message();
  EXPECT_NE(c.status().message().find("No such file or directory"), std::string::npos) << c.status().message();
}

TEST(SpawnOptions, AProgramMissingFromPathIsAnError) {
  auto c = ChildProcess::spawn({"ak-program-that-is-on-no-path"}, {});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("ak-program-that-is-on-no-path"), std::string::npos) << c.status().message();
}

TEST(SpawnOptions, AWorkingDirectoryThatDoesNotExistIsAnErrorNamingIt) {
  SpawnOptions o;
  o.working_dir = "/nonexistent/ak-dir";
  auto c = ChildProcess::spawn({"/bin/sh", "-c", "exit 0"}, o);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("working directory /nonexistent/ak-dir"), std::string::npos)
      << c.status().message();
}

TEST(SpawnOptions, TheChildRunsInTheWorkingDirectory) {
  SpawnOptions o;
  o.capture_stdout = true;
  o.working_dir = "/";
  auto c = ChildProcess::spawn({"/bin/sh", "-c", "pwd"}, o);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(first_line(*c), "/");
}

TEST(SpawnOptions, AScrubbedEnvironmentPassesOnlyTheKeptNamesAndTheGivenEntries) {
  ASSERT_EQ(setenv("AK_PROCESS_TEST_SECRET", "leaked", 1), 0);
  ASSERT_EQ(setenv("AK_PROCESS_TEST_KEPT", "kept", 1), 0);
  SpawnOptions o;
  o.capture_stdout = true;
  o.inherit_env = false;
  o.keep_env = {"AK_PROCESS_TEST_KEPT"};
  o.env = {"AK_PROCESS_TEST_ADDED=added"};
  auto c = ChildProcess::spawn(
      {"/bin/sh", "-c", "echo \"${AK_PROCESS_TEST_SECRET-unset} $AK_PROCESS_TEST_KEPT $AK_PROCESS_TEST_ADDED\""}, o);
  unsetenv("AK_PROCESS_TEST_SECRET");
  unsetenv("AK_PROCESS_TEST_KEPT");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(first_line(*c), "unset kept added");
}

TEST(SpawnOptions, AGivenEntryReplacesTheInheritedVariableOfTheSameName) {
  ASSERT_EQ(setenv("AK_PROCESS_TEST_VAR", "inherited", 1), 0);
  SpawnOptions o;
  o.capture_stdout = true;
  o.env = {"AK_PROCESS_TEST_VAR=given"};
  auto c = ChildProcess::spawn({"/bin/sh", "-c", "env | grep '^AK_PROCESS_TEST_VAR=' | tr '\\n' ' '; echo"}, o);
  unsetenv("AK_PROCESS_TEST_VAR");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(first_line(*c), "AK_PROCESS_TEST_VAR=given ");
}

// The death signal fires when the spawning thread ends: the child, alive and ready while that
// thread ran, is killed without anyone signalling it.
TEST(SpawnOptions, TheChildGetsItsDeathSignalWhenTheThreadThatSpawnedItEnds) {
  ChildProcess c;
  std::thread spawner([&] {
    SpawnOptions o;
    o.capture_stdout = true;
    o.death_signal = SIGTERM;
    auto child = ChildProcess::spawn({"/bin/sh", "-c", "echo READY; exec sleep 300"}, o);
    ASSERT_TRUE(child.ok()) << child.status().message();
    auto ready = child->wait_for_line("READY", seconds(30));
    ASSERT_TRUE(ready.ok()) << ready.status().message();
    c = std::move(*child);
  });
  spawner.join();
  ASSERT_GT(c.pid(), 0);
  auto code = c.wait_for(seconds(60));
  ASSERT_TRUE(code.has_value()) << "the child outlived the thread that spawned it by 60 s";
  EXPECT_EQ(*code, 128 + SIGTERM);
}

// A worker that blocks SIGTERM (for sigwait) must not hand that mask to a child it will stop with
// SIGTERM: stop() would wait out the grace and SIGKILL instead.
TEST(SpawnOptions, TheChildStartsWithNoBlockedSignalsWhateverTheSpawningThreadBlocked) {
  sigset_t term, old;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &term, &old), 0);
  SpawnOptions o;
  o.capture_stdout = true;
  auto c = ChildProcess::spawn({"/bin/sh", "-c", "echo READY; exec sleep 300"}, o);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_TRUE(c->wait_for_line("READY", seconds(30)).ok());
  EXPECT_EQ(c->stop(seconds(60)), 128 + SIGTERM);
}

TEST(SpawnOptions, DescriptorsWithoutCloseOnExecAreNotInheritedByTheChild) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);  // deliberately without O_CLOEXEC, like a careless library's socket
  SpawnOptions o;
  o.capture_stdout = true;
  auto c = ChildProcess::spawn(
      {"/bin/sh", "-c", "if [ -e /proc/$$/fd/" + std::to_string(p[1]) + " ]; then echo open; else echo closed; fi"}, o);
  close(p[0]);
  close(p[1]);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(first_line(*c), "closed");
}

TEST(SpawnOptions, NullStdinGivesTheChildAnEmptyStdin) {
  SpawnOptions o;
  o.capture_stdout = true;
  o.null_stdin = true;
  auto c = ChildProcess::spawn({"/bin/sh", "-c", "n=$(cat | wc -c); echo \"read $n\""}, o);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(first_line(*c), "read 0");
}

TEST(SpawnOptions, AppendOutputKeepsWhatTheOutputFileHeld) {
  TempFile log;
  std::ofstream(log.path) << "before\n";
  SpawnOptions o;
  o.output_path = log.path;
  o.append_output = true;
  auto c = ChildProcess::spawn({"/bin/sh", "-c", "echo out; echo err >&2"}, o);
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_EQ(c->wait(), 0);
  std::ifstream in(log.path);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(all, "before\nout\nerr\n");
}

TEST(SpawnOptions, AnOutputFileThatCannotBeOpenedIsAnError) {
  SpawnOptions o;
  o.output_path = "/nonexistent/ak-dir/log";
  auto c = ChildProcess::spawn({"/bin/sh", "-c", "exit 0"}, o);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("/nonexistent/ak-dir/log"), std::string::npos) << c.status().message();
}

// The exit wakes wait_until at once (pidfd), long before its deadline. Closing stdin is the
// signal to exit: no timing guess.
TEST(ChildProcessWaitUntil, ReturnsWhenTheChildExitsNotAtTheDeadline) {
  SpawnOptions o;
  o.pipe_stdin = true;
  auto c = ChildProcess::spawn({"/bin/sh", "-c", "read x; exit 4"}, o);
  ASSERT_TRUE(c.ok()) << c.status().message();
  const auto t0 = steady_clock::now();
  c->close_stdin();
  auto code = c->wait_until(t0 + seconds(120));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 4);
  EXPECT_LT(steady_clock::now() - t0, seconds(60)) << "wait_until waited for the deadline, not the exit";
  ASSERT_TRUE(c->wait_status().has_value());
  EXPECT_TRUE(WIFEXITED(*c->wait_status()));
}

TEST(ChildProcessWaitUntil, WaitsUntilTheDeadlineForAChildThatKeepsRunning) {
  SpawnOptions o;
  o.pipe_stdin = true;  // the child waits for a line that never comes
  auto c = ChildProcess::spawn({"/bin/sh", "-c", "read x"}, o);
  ASSERT_TRUE(c.ok()) << c.status().message();
  const auto t0 = steady_clock::now();
  EXPECT_FALSE(c->wait_until(t0 + milliseconds(300)).has_value());
  EXPECT_GE(steady_clock::now() - t0, milliseconds(300));
  EXPECT_TRUE(c->running());
  EXPECT_FALSE(c->wait_status().has_value());
}

// What a step started lives on in its group after the step itself exited: kill_group ends it.
TEST(ChildProcessKillGroup, EndsWhatTheChildLeftInItsGroupAfterItExited) {
  Orphan orphan = spawn_orphan();
  ASSERT_NE(orphan.pid, 0);
  ChildProcess* c = &orphan.shell;
  const pid_t grandchild = orphan.pid;
  const int fd = pidfd_of(grandchild);
  ASSERT_GE(fd, 0) << "pidfd_open(" << grandchild << "): errno " << errno;
  EXPECT_EQ(c->wait(), 0);
  EXPECT_EQ(c->kill_group(), 0);  // the child's own exit code
  pollfd p{fd, POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 30000), 1) << "grandchild " << grandchild << " still alive 30 s after kill_group";
  close(fd);
}

// wait_for_exit watches a process this one did not spawn (a grandchild, reparented once its
// parent exits): it waits out the deadline while the process lives and wakes on its death, not at
// the deadline.
TEST(WaitForExit, WaitsForAProcessThatIsNotItsChildUntilItDiesOrTheDeadline) {
  Orphan orphan = spawn_orphan();
  ASSERT_NE(orphan.pid, 0);
  ChildProcess* c = &orphan.shell;
  const pid_t grandchild = orphan.pid;
  EXPECT_EQ(c->wait(), 0);
  auto t0 = steady_clock::now();
  EXPECT_FALSE(wait_for_exit(grandchild, t0 + milliseconds(300)));
  EXPECT_GE(steady_clock::now() - t0, milliseconds(300));
  ASSERT_TRUE(kill_process_group(c->pid(), SIGKILL));
  t0 = steady_clock::now();
  EXPECT_TRUE(wait_for_exit(grandchild, t0 + seconds(120)));
  EXPECT_LT(steady_clock::now() - t0, seconds(60)) << "wait_for_exit waited for the deadline, not the death";
}

TEST(WaitForExit, AProcessThatIsGoneOrAZombieHasExitedAtOnce) {
  SpawnOptions o;
  o.pipe_stdin = true;
  auto c = ChildProcess::spawn({"/bin/sh", "-c", "read x; exit 3"}, o);
  ASSERT_TRUE(c.ok()) << c.status().message();
  const pid_t pid = c->pid();
  c->close_stdin();
  siginfo_t info{};
  // Waits for the exit without reaping: the child stays a zombie.
  ASSERT_EQ(waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT), 0) << errno;
  EXPECT_TRUE(wait_for_exit(pid, steady_clock::now()));
  EXPECT_EQ(c->wait(), 3);
  EXPECT_TRUE(wait_for_exit(pid, steady_clock::now()));
  EXPECT_TRUE(wait_for_exit(0, steady_clock::now()));
}

TEST(KillProcessGroup, RefusesThePidsThatWouldSignalEveryone) {
  EXPECT_FALSE(kill_process_group(0, 0));
  EXPECT_FALSE(kill_process_group(1, 0));
  EXPECT_FALSE(kill_process_group(-5, 0));
}

}  // namespace
}  // namespace ak
