// SandboxJobRunner: the JobRunner (worker/job_runner.h) for kernel candidates, every job that is
// not a KernelBench problem.
//
// compile_threads threads compile the jobs it holds ahead through the Compiler (worker/compiler.h),
// in the order they were started, so that compiling job N+1 overlaps measuring job N; one executor
// thread measures compiled jobs one at a time through the SandboxRunner (worker/supervisor.h),
// because GPU measurement must be serialised.
//   - A compile error ends the job COMPILE_ERROR (stage "compile") without touching the sandbox; a
//     compiler that fails for another reason (cache directory, missing toolchain) or throws ends
//     it CRASH.
//   - The measurement is bounded by the job's timeout; a runner that throws ends the job CRASH
//     (stage "sandbox").
//   - cancel(): a job waiting to compile or to be measured ends CANCELLED (stage "worker") at once;
//     a job compiling ends CANCELLED (stage "compile") when its compile ends and is never measured;
//     a job being measured finishes and reports as usual.
//   - shutdown(): jobs waiting to compile or to be measured, and a job whose compile ends after it
//     (unless it was cancelled), are dropped without a result; the measurement in progress finishes.
//
// Thread-safety: as JobRunner says. The compiler is called from the compile threads at once
// (Compiler::compile is thread-safe); the SandboxRunner only from the executor thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "worker/compiler.h"
#include "worker/job_runner.h"
#include "worker/stats.h"
#include "worker/supervisor.h"

namespace ak {

struct SandboxJobRunnerOptions {
  int slots = 2;  // jobs held at once: one measured, the rest compiled ahead or compiling
  int compile_threads = 1;
  std::string worker_id;  // for log lines
  // Compile queue depth and compile cache hits and misses; null: not counted.
  std::shared_ptr<WorkerStats> stats;
};

class SandboxJobRunner final : public JobRunner {
 public:
  // `caps` is what the compiler compiles for; `clock` (which must outlive the runner) times failed
  // compiles. Starts the compile and executor threads.
  SandboxJobRunner(SandboxJobRunnerOptions options, Capabilities caps, Clock& clock, std::unique_ptr<Compiler> compiler,
                   std::unique_ptr<SandboxRunner> sandbox);
  ~SandboxJobRunner() override;
  SandboxJobRunner(const SandboxJobRunner&) = delete;
  SandboxJobRunner& operator=(const SandboxJobRunner&) = delete;

  std::string_view kind() const override { return "sandbox"; }
  bool accepts(const JobSpec& job) const override { return !job.kernelbench.has_value(); }
  int slots() const override { return options_.slots; }
  void start(const protocol::Job& job, std::chrono::milliseconds timeout, JobDone done) override;
  CancelEffect cancel(const std::string& job_id, int attempt) override;
  void shutdown() override;

 private:
  using Key = JobKey;
  using Held = HeldJob;
  struct Compiled {
    Held held;
    CompiledArtifact artifact;
  };

  void compile_loop();
  void execute_loop();
  // The result of a compile that produced no artefact.
  ResultRecord compile_failure(const Held& h, const std::optional<Result<CompiledArtifact>>& art,
                               const std::string& crash, int64_t t0_ms) const;

  SandboxJobRunnerOptions options_;
  Capabilities caps_;
  Clock& clock_;
  std::unique_ptr<Compiler> compiler_;
  std::unique_ptr<SandboxRunner> sandbox_;

  std::mutex mu_;  // guards everything below
  std::condition_variable compile_cv_;
  std::condition_variable run_cv_;
  std::deque<Held> compile_queue_;
  void count_compile_queue();  // publishes compile_queue_.size() to options_.stats; mu_ held
  std::deque<Compiled> run_queue_;
  std::set<Key> compiling_;
  std::set<Key> cancelled_while_compiling_;
  std::optional<Key> measuring_;
  bool shutdown_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace ak
