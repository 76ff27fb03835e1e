// ChildProcess: a real child process started with fork/exec, for `autokernel run` (which starts
// Redis, a coordinator and workers) and for integration tests (which kill them).
//
// The child's stdout can be captured line by line for readiness handshakes ("READY {...}" lines),
// so nobody sleeps waiting for a child to come up. stderr is inherited. The child gets
// PR_SET_PDEATHSIG(SIGKILL) so it never outlives a parent that died hard. Not thread-safe; one
// owner. The destructor kills (SIGKILL) and reaps a child that is still running.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace ak {

class ChildProcess {
 public:
  struct Options {
    bool capture_stdout = false;
    std::vector<std::string> env;  // extra NAME=value entries
    // The child's stdout and stderr go to this file (created or truncated) instead; ignored for
    // stdout when capture_stdout is set. Empty: inherited.
    std::string output_path;
    // The child leads a new process group, so kill_group() reaches what it starts in turn
    // (compilers, build tools).
    bool new_process_group = false;
    // The child's stdin is a pipe that write_line() feeds (a server taking requests line by line);
    // otherwise it is inherited.
    bool pipe_stdin = false;
  };
  static Result<ChildProcess> spawn(const std::vector<std::string>& argv, const Options& options);

  ChildProcess() = default;
  ChildProcess(ChildProcess&& o) noexcept;
  ChildProcess& operator=(ChildProcess&& o) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  bool running();
  // Next full line of captured stdout (without '\n'); empty optional on timeout; error on EOF.
  Result<std::optional<std::string>> read_line(std::chrono::milliseconds timeout);
  // Reads lines until one starts with `prefix`; returns the rest of that line (kTimedOut when
  // none came in time; a line already read in is looked at even when the time is up).
  Result<std::string> wait_for_line(const std::string& prefix, std::chrono::milliseconds timeout);
  // Writes `line` and a newline to the child's stdin (Options::pipe_stdin); an error when the
  // child has closed it or is gone.
  Status write_line(const std::string& line);
  void signal(int sig);
  // Waits for exit; returns the exit code, or 128 + signal number.
  int wait();
  // Waits at most `timeout` for exit: the exit code as wait() gives it, or nullopt when the child
  // is still running at the deadline (it is left running). Blocks on a pidfd, no polling loop.
  std::optional<int> wait_for(std::chrono::milliseconds timeout);
  // SIGKILL to the child's process group (new_process_group) or to the child, then reaps it.
  int kill_group();
  // SIGTERM, wait up to `grace`, then SIGKILL.
  int stop(std::chrono::milliseconds grace = std::chrono::milliseconds(5000));

 private:
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  int stdin_fd_ = -1;
  std::string buffer_;
  std::optional<int> exit_code_;
};

// Removes the entries of `root` named `<prefix><pid>-<anything>` whose process `pid` no longer
// exists: what a process killed with SIGKILL left behind (sandbox temporary folders, KernelBench
// job folders). Entries of live processes, and names that do not fit, are left alone (a reused pid
// only delays a removal). Returns how many entries were removed.
int remove_leftovers_of_dead_processes(const std::string& root, const std::string& prefix);
// The same, once per (root, prefix) in this process's life: what dead processes left cannot grow
// while this one runs, so later calls (every sandbox start, every runner) return 0 at once.
int remove_leftovers_of_dead_processes_once(const std::string& root, const std::string& prefix);

// Directory of the running executable (to find sibling binaries such as the sandbox).
std::string self_exe_dir();
std::string self_exe_path();

}  // namespace ak
