// KernelBenchRunner: runs a KernelBench job (JobSpec::kernelbench) through the harness
// (kernelbench/harness/, protocol in kernelbench/HARNESS.md), each step a Python subprocess in
// its own process group, with its own job folder, bounded by what is left of the job's timeout:
//   candidate mode: reference (the problem alone, in one process) -> candidate (the faithful
//     KernelBench evaluation plus the strict probes, in another) -> judge (compares the two
//     processes' outputs, executes neither's code) when strict is on;
//   baseline mode: one baseline step (eager or torch.compile).
// The faithful verdict sets the status: correct PASS, incorrect FAIL (stage "correctness"),
// runtime error FAIL (stage "runtime"), compile failure COMPILE_ERROR; a step past the deadline
// is killed with its group (TIMEOUT), one that dies without a verdict is CRASH. The strict checks
// never change the status: they are reported in ResultRecord::kernelbench beside it.
//
// Thread-compatible: one run() at a time per runner; several runners may share a GPU through
// gpu_lock_path. cancel() may be called from any thread: it kills the step in progress of the job
// it names (the job's campaign was cancelled), and run() then reports CANCELLED.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/confine.h"
#include "common/job.h"
#include "common/process.h"

namespace ak {

struct KernelBenchRunnerOptions {
  std::string python = "python3";  // with torch (and triton for triton candidates)
  std::string work_dir;            // job folders go under it; the harness is written here
  std::string device = "cpu";      // "cuda:<ordinal>" or "cpu"
  bool keep_job_dirs = false;      // keep each job's folder (files, logs) after the run
  // Lock file through which the runners sharing a GPU take turns (kernelbench/HARNESS.md, "Sharing
  // a GPU"): every runner of one GPU must name the same file. Empty: no lock (one runner per GPU).
  std::string gpu_lock_path;
  int inductor_threads = 0;        // TORCHINDUCTOR_COMPILE_THREADS for the harness; 0: torch's default
  // Run the steps as children forked from one harness process that has imported torch, dynamo and
  // inductor once (kernelbench/HARNESS.md, "Fork server"), instead of a fresh Python per step. A
  // server that cannot start, or refuses (CUDA's driver loaded in it), leaves this runner on fresh
  // processes.
  bool fork_server = false;
  // How each step is confined (common/confine.h): every available layer, its own cgroup, a
  // scrubbed environment, the job's folder (handed to the child's uid) and the harness as its only
  // views of the worker's folders. A confined runner starts a fresh Python per step: the fork
  // server would hand every job the same view (and its pids are not ours inside a pid namespace).
  ConfinementPolicy confinement;
};

struct KernelBenchOutcome {
  ResultStatus status = ResultStatus::kCrash;
  std::string stage;
  std::string reason;
  Measurement m;            // latency_us / baseline_us / speedup from the faithful timing [us]
  nlohmann::json kernelbench;  // ResultRecord::kernelbench
};

class KernelBenchRunner {
 public:
  explicit KernelBenchRunner(KernelBenchRunnerOptions options);
  KernelBenchOutcome run(const JobSpec& job, std::chrono::milliseconds timeout);
  // The job this runner runs next or now (so that a cancel arriving before run() starts is not
  // missed); run() clears it when it returns.
  void claim(const std::string& job_id);
  // Stops `job_id` if it is the claimed job: its step's process group is killed, no further step
  // starts, and run() returns CANCELLED (a job whose steps had all run keeps its result). Returns
  // whether the job was this runner's.
  bool cancel(const std::string& job_id);

 private:
  KernelBenchOutcome run_job(const JobSpec& job, std::chrono::milliseconds timeout);
  void witness(const std::filesystem::path& dir, const std::filesystem::path& private_dir, const JobSpec& job,
               const nlohmann::json& base, std::chrono::steady_clock::time_point deadline, double runtime_ms,
               KernelBenchOutcome& out, nlohmann::json& kb);
  struct Step {
    bool timed_out = false;
    int exit_code = 0;
    nlohmann::json result;  // null when the step wrote none
    std::string log_tail;
  };
  // `env` (NAME=value) reaches that step alone, and `read_only` files are bound into it read-only
  // (files of the job's private folder, which no step can write); a step given either runs as a
  // fresh process, never in the fork server.
  Step run_step(const std::string& dir, const std::string& name, nlohmann::json request,
                std::chrono::steady_clock::time_point deadline, const std::vector<std::string>& env = {},
                const std::vector<std::string>& read_only = {});
  std::string harness_path();
  // The step through the fork server: false when the server could not take it (not started,
  // refused, gone before the step started), so the caller runs it as a fresh process.
  bool run_in_server(const std::filesystem::path& request, const std::filesystem::path& log,
                     std::chrono::steady_clock::time_point deadline, Step& step);
  bool ensure_server(std::chrono::steady_clock::time_point deadline);
  void spawn_step(const std::filesystem::path& request, const std::filesystem::path& log,
                  std::chrono::steady_clock::time_point deadline, Step& step, const std::vector<std::string>& env,
                  const std::vector<std::string>& read_only);
  std::vector<std::string> step_env() const;

  std::mutex mu_;  // guards the four below
  std::string claimed_;
  pid_t step_group_ = -1;  // the running step's process group
  bool cancelled_ = false;  // a cancel for the claimed job arrived
  bool stopped_ = false;    // and it killed a step or kept one from starting: the job is CANCELLED

  KernelBenchRunnerOptions options_;
  std::string harness_path_;
  // The fork server, started on first use by the thread that calls run(): its death signal is
  // tied to that thread, so run() is always called from one long-lived thread (the agent's).
  std::unique_ptr<ChildProcess> server_;
  bool server_refused_ = false;  // it refused, or failed to start three times in a row: fresh processes only
  int server_failures_ = 0;
  int index_ = 0;                // this runner's number in the process, for its server's log
};

}  // namespace ak
