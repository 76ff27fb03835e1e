// KernelBenchJobRunner: the JobRunner (worker/job_runner.h) for KernelBench problems
// (JobSpec::kernelbench). They skip the compiler and the sandbox: the harness compiles (load_inline,
// Triton) in its own processes.
//
// One KernelBenchRunner (worker/kernelbench_runner.h) and one long-lived thread per slot (the
// runner's fork server is tied to the thread that runs it); the slots run at once and share the GPU
// through the runners' lock file (kernelbench/HARNESS.md, "Sharing a GPU").
//   - The runner's outcome becomes the result: status, stage, reason, the measurement and the
//     harness's verdict (ResultRecord::kernelbench); a runner that throws ends the job CRASH.
//   - cancel(): a job not yet begun ends CANCELLED (stage "worker") at once; a running job's step is
//     killed and it reports CANCELLED (KernelBenchRunner::cancel).
//   - shutdown(): jobs not yet begun are dropped without a result; running jobs finish.
//
// Thread-safety: as JobRunner says.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "worker/job_runner.h"
#include "worker/kernelbench_runner.h"

namespace ak {

struct KernelBenchJobRunnerOptions {
  KernelBenchRunnerOptions runner;  // every slot's runner gets these
  int slots = 1;                    // jobs run at once
};

class KernelBenchJobRunner final : public JobRunner {
 public:
  // Starts one thread per slot.
  explicit KernelBenchJobRunner(KernelBenchJobRunnerOptions options);
  ~KernelBenchJobRunner() override;
  KernelBenchJobRunner(const KernelBenchJobRunner&) = delete;
  KernelBenchJobRunner& operator=(const KernelBenchJobRunner&) = delete;

  std::string_view kind() const override { return "KernelBench"; }
  bool accepts(const JobSpec& job) const override { return job.kernelbench.has_value(); }
  int slots() const override { return static_cast<int>(slots_.size()); }
  void start(const protocol::Job& job, std::chrono::milliseconds timeout, JobDone done) override;
  CancelEffect cancel(const std::string& job_id, int attempt) override;
  void shutdown() override;

 private:
  using Key = JobKey;
  using Held = HeldJob;
  struct Slot {
    std::unique_ptr<KernelBenchRunner> runner;
    std::optional<Key> claimed;  // the job this slot runs, under mu_
  };

  void loop(Slot& slot);

  std::mutex mu_;  // guards queue_, shutdown_ and every Slot::claimed
  std::condition_variable cv_;
  std::deque<Held> queue_;
  bool shutdown_ = false;
  std::vector<Slot> slots_;
  std::vector<std::thread> threads_;
};

}  // namespace ak
