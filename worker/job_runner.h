// JobRunner: how the worker agent (worker/agent.h) runs one kind of job.
//
// The agent keeps one queue of the jobs it holds and one count of the jobs each runner has in
// hand; it starts the oldest queued job whose runner has a free slot, forwards a CANCEL_JOB to the
// runner that holds the job, and completes every result in one place (worker id, GPU, source hash,
// completion time) before the outbox takes it. A runner only runs jobs: it never touches the
// socket, the outbox or the agent's queue.
//
// Runners today (one per kind; adding a kind of job means adding one runner and one line where the
// agent assembles its runners, make_job_runners in worker/agent.cc):
//   - SandboxJobRunner (worker/sandbox_job_runner.h): kernel candidates, compiled ahead on CPU
//     threads and measured one at a time in the sandbox;
//   - KernelBenchJobRunner (worker/kernelbench_job_runner.h): KernelBench problems
//     (JobSpec::kernelbench) through the harness;
//   - ModelJobRunner (worker/model_job_runner.h): model jobs (JobSpec::model), the model
//     pipeline's Python.
//
// Contract for every implementation:
//   - Every job given to start() ends with exactly one call of its `done` callback: a result, or
//     std::nullopt when the runner drops the job without one because it is shutting down (its
//     lease then expires at the coordinator and the job is delivered again). `done` may be called
//     from any thread, inside start(), cancel() or shutdown() included, but never while the runner
//     holds a lock that its own methods take.
//   - start(), cancel() and shutdown() are called by one thread (the agent's main thread) and
//     never block on a job: the work happens on the runner's own threads.
//   - The destructor calls shutdown() if needed and waits for the jobs in progress (each bounded
//     by its timeout) and for the runner's threads.
//   - No exception leaves a runner's thread: a throwing compiler or harness becomes a CRASH result.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "common/job.h"
#include "common/protocol.h"

namespace ak {

// What a runner tells the agent about one job. The runner fills what it knows (status, stage,
// reason, the measurement, its hashes, the KernelBench verdict); the agent fills job_id, attempt,
// worker_id, gpu, completed_wall_ms and source_hash where the runner left it empty.
using JobDone = std::function<void(std::optional<ResultRecord>)>;

// What happened to a job a cancel reached.
enum class CancelEffect {
  kNotHeld,    // the runner does not hold it (never given, or already finished)
  kDropped,    // it had not begun: it has ended CANCELLED (stage "worker") already
  kStopping,   // it is being stopped: it ends CANCELLED unless its work had all run
  kFinishing,  // it is being measured: it finishes and reports as usual (bounded by its timeout)
};

class JobRunner {
 public:
  virtual ~JobRunner() = default;

  // Names the runner in log lines ("sandbox", "KernelBench").
  virtual std::string_view kind() const = 0;
  // Whether this runner runs `job`. The agent gives a job to the first of its runners that accepts it.
  virtual bool accepts(const JobSpec& job) const = 0;
  // How many jobs the runner takes at once (begun or waiting inside it); at least 1, fixed for the
  // runner's life. The agent starts no more, and announces at least this many slots.
  virtual int slots() const = 0;
  // Whether a job of this runner must have the worker's device to itself (a model's profile, whose
  // timings another job's kernels would disturb, and whose kernels would disturb theirs). The agent
  // starts such a job only when no other job is in any runner's hands, starts no job queued after
  // it before it, and none beside it while it runs.
  virtual bool exclusive() const { return false; }
  // Takes `job` (accepted, and a slot free); its work is bounded by `timeout` [ms], counted from
  // when the runner begins measuring or running it. `done` is called once when it ends.
  virtual void start(const protocol::Job& job, std::chrono::milliseconds timeout, JobDone done) = 0;
  // CANCEL_JOB for (job_id, attempt): see CancelEffect. Repeats are harmless.
  virtual CancelEffect cancel(const std::string& job_id, int attempt) = 0;
  // Stops taking jobs: jobs not begun end at once with std::nullopt, jobs in progress finish and
  // report. Returns without waiting for them.
  virtual void shutdown() = 0;
};

// A job a runner holds until it ends: what start() was given, keyed by (job_id, attempt).
using JobKey = std::pair<std::string, int>;
struct HeldJob {
  protocol::Job job;
  std::chrono::milliseconds timeout{0};
  JobDone done;
  JobKey key() const { return {job.spec.job_id, job.attempt}; }
};

// The result of a job cancelled before it was measured: CANCELLED at `stage` ("worker": it was
// waiting; "compile": it was compiling).
inline ResultRecord cancelled_before_measurement(const std::string& stage) {
  ResultRecord r;
  r.status = ResultStatus::kCancelled;
  r.stage = stage;
  r.reason = "its campaign was cancelled before it was measured";
  return r;
}

}  // namespace ak
