// Running candidates in a sandbox child process, so that a candidate that hangs, faults or
// corrupts the CUDA context takes down only the child.
//
// SandboxRunner is the narrow interface the agent uses (worker/agent.h); SandboxSupervisor is the
// real implementation, and tests of the agent substitute a fake. The pipe protocol is
// worker/sandbox_protocol.h.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/confine.h"
#include "common/job.h"
#include "common/process.h"
#include "common/status.h"
#include "worker/sandbox_protocol.h"
#include "worker/stats.h"

namespace ak {

class SandboxRunner {
 public:
  virtual ~SandboxRunner() = default;
  // Runs one candidate and returns its outcome; never throws. Infrastructure failures come back
  // as a reply too: kTimeout when no reply arrived within `timeout`, kCrash (stage "sandbox") when
  // the sandbox died, could not be started or broke the protocol. Called by one thread at a time.
  virtual SandboxReply run(const SandboxRequest& request, std::chrono::milliseconds timeout) = 0;
};

struct SandboxOptions {
  std::string executable;         // path of autokernel-sandbox
  // Counts every sandbox started after the first (sandbox_restarts); null: not counted.
  std::shared_ptr<WorkerStats> stats;
  Backend backend = Backend::kCpu;
  int device_index = 0;           // passed as --device N
  std::vector<std::string> extra_args;  // appended after --backend/--device
  std::string stderr_path;        // the sandbox's log, appended to; empty: inherit ours
  // How long a fresh sandbox may take to send its SandboxHello (libtorch + CUDA init) [ms].
  std::chrono::milliseconds start_timeout{60'000};
  // After EOF on its stdout, or after we close its stdin, how long the child may take to exit
  // before it is killed [ms].
  std::chrono::milliseconds exit_grace{2'000};
  // Longest reply line accepted; longer is a protocol violation [bytes].
  size_t max_line_bytes = 16u << 20;
  // Limits the sandbox applies to itself before it loads any candidate (--limit-as-mb,
  // --limit-nofile; no core dumps). Address space: 0 = none, the default for cuda, whose
  // driver reserves virtual address space the size of host plus device memory; -1 = the
  // backend's default (cpu: 16 GiB).
  int64_t address_space_mb = -1;
  int open_files = 256;
  // Each sandbox gets a private temporary directory (mkdtemp under tmp_root, named
  // ak-sandbox-<worker pid>-XXXXXX), removed with the sandbox; those of workers that were killed
  // with SIGKILL are removed when this process first starts a sandbox under that root. TMPDIR and HOME point at it. The environment is scrubbed: only PATH,
  // LD_LIBRARY_PATH, the CUDA_* / NVIDIA_* device selection variables and extra_env pass.
  std::string tmp_root = "/tmp";
  // "NAME=value", added after the scrub; the private folder's TMPDIR, HOME, CUDA_CACHE_PATH and
  // TRITON_CACHE_DIR override any of the same name here.
  std::vector<std::string> extra_env;
  // How the sandbox is confined (common/confine.h; the worker probes it at start). Where it confines
  // at all, each sandbox gets its own cgroup, its temporary directory belongs to the child's uid,
  // each request's artefact is staged (hard link, else copy) into <tmp dir>/in/<n>/, which the
  // child sees read-only, and the request names that copy: the child never sees the compile cache.
  // The default confines nothing.
  ConfinementPolicy confinement;
};

// Owns at most one sandbox child: `executable --backend cpu|cuda --device N [extra_args]`, started
// with ChildProcess (common/process.h) in its own process group, stdin and stdout on pipes, stderr
// inherited or sent to stderr_path, a scrubbed environment and a private temporary directory (see SandboxOptions). The
// child is started lazily by run() (or eagerly by start()) and waited for with the SandboxHello handshake, bounded by
// start_timeout.
//
// run(): writes one request line and waits with poll() for one reply line until the deadline.
//   - no reply in time          -> SIGKILL to the process group, waitpid; kTimeout, reason "no reply
//                                  within N ms; sandbox killed"
//   (TIMEOUT and a death carry the stage of the sandbox's last progress line, "sandbox" if none)
//   - EOF, child death          -> kCrash, reason "sandbox died with signal 11 (Segmentation
//                                  fault)" or "sandbox exited with code N"
//   - unparsable reply          -> kCrash (protocol violation), sandbox killed
//   - a kCrash reply            -> returned as is; the sandbox exits after it (sticky CUDA error,
//                                  worker/sandbox_protocol.h) and is reaped (killed after exit_grace)
// A sandbox found gone before it could have read the request (it died between jobs: the write
// fails, or it exits with code 0, its answer to EOF, without replying) is replaced once and the
// request sent to the fresh one; that is not the job's fault.
// After any of these the next run() starts a fresh sandbox. So does a reply after which the sandbox's
// tree holds processes besides the sandbox (a candidate's daemon): the tree and the sandbox's cgroup
// are killed at the end of that job. No zombie is left behind: every child
// is reaped, and the destructor closes its stdin, waits exit_grace, kills it if needed and reaps it.
//
// Not thread-safe: one thread (the agent's executor) owns a supervisor. SIGPIPE is blocked on the
// calling thread while writing, so a dead child shows up as an error, never as a signal.
class SandboxSupervisor final : public SandboxRunner {
 public:
  explicit SandboxSupervisor(SandboxOptions options);
  ~SandboxSupervisor() override;
  SandboxSupervisor(const SandboxSupervisor&) = delete;
  SandboxSupervisor& operator=(const SandboxSupervisor&) = delete;

  // Starts a sandbox if none is running and waits for its hello. kUnavailable if the executable
  // cannot be started, exits, sends no hello within start_timeout, or says it is not ready.
  Status start();
  SandboxReply run(const SandboxRequest& request, std::chrono::milliseconds timeout) override;
  // Closes the child's stdin, waits exit_grace for it to exit, then kills and reaps it.
  void stop();

  bool running() const { return child_.pid() > 0; }
  const std::string& tmp_dir() const { return tmp_dir_; }  // of the running sandbox; "" when none
  pid_t pid() const { return child_.pid(); }               // -1 when none
  const SandboxHello& hello() const { return hello_; }  // of the current (or last) sandbox
  int64_t starts() const { return starts_; }             // sandboxes started so far

 private:
  enum class LineOutcome { kLine, kTimeout, kEof, kTooLong, kError };
  LineOutcome read_line(std::chrono::steady_clock::time_point deadline, std::string* line);
  Status write_all(const std::string& data, std::chrono::steady_clock::time_point deadline);
  // Kills (if `kill_first`) or waits up to exit_grace, then reaps; returns how the child ended.
  std::string reap(bool kill_first, int* wait_status = nullptr);
  // One try of run(); sets *gone when the sandbox was found gone before it could have read the
  // request (only on the first try: *gone is true on entry for the second).
  SandboxReply run_once(const SandboxRequest& request, const std::string& request_line,
                        std::chrono::steady_clock::time_point deadline, const std::string& timeout_reason, bool* gone);
  void remove_tmp_dir();
  // Reaps the child if it has already exited; true if it had.
  bool exited_while_idle();

  // The request with its artefacts staged where the confined sandbox can read them; the staged
  // folder is removed after the job.
  Result<SandboxRequest> stage(const SandboxRequest& request, std::string* staged_dir);
  // Processes below the sandbox other than itself (and its pid namespace's init), plus those left in
  // its cgroup.
  int stray_processes();

  SandboxOptions options_;
  CgroupJob cgroup_;  // the running sandbox's; empty where cgroups are unavailable
  bool confined_ = false;
  int expected_descendants_ = 0;
  int64_t staged_ = 0;  // staged requests so far, naming their folders
  ChildProcess child_;  // the running sandbox; pid -1 once reaped
  std::string buffer_;  // bytes read past the last line
  std::string tmp_dir_;  // the running sandbox's private temporary directory
  SandboxHello hello_;
  int64_t starts_ = 0;
};

}  // namespace ak
