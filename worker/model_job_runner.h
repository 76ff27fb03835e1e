// ModelJobRunner: the JobRunner (worker/job_runner.h) for model jobs (JobSpec::model,
// models/README.md). A job is one Python step (worker/python_step.h): the model pipeline's
// profile_model.py, written from the binary into the work folder, run in the job's own folder with
// the worker's Python and device, confined like a candidate, bounded by the job's timeout.
//   - exit 0 with a profile: PASS, the profile in ResultRecord::model;
//   - the model cannot be loaded (exit 3), ran out of GPU memory (4) or raised (5): FAIL at stage
//     "model", the reason the script gave (the last line of its stderr);
//   - past the timeout: TIMEOUT, its process group killed; any other end: CRASH with the log's tail.
//   - cancel(): a waiting job ends CANCELLED at once, a running one's step is killed and it ends
//     CANCELLED; shutdown(): waiting jobs are dropped without a result, a running one finishes.
// One slot, and exclusive (JobRunner::exclusive): the agent runs a profile with no other job of
// the worker beside it, so that neither disturbs the other's timings.
//
// Thread-safety: as JobRunner says.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/confine.h"
#include "worker/job_runner.h"

namespace ak {

struct ModelJobRunnerOptions {
  std::string python = "python3";  // with torch
  std::string work_dir;            // the pipeline's files and the job folders go under it
  std::string device = "cpu";      // "cuda:<ordinal>" or "cpu"
  Ceilings ceilings;               // the worker's, for the profile's roofline (none measured: no bound)
  ConfinementPolicy confinement;
  bool keep_job_dirs = false;  // keep each job's folder (files, logs) after the run
};

class ModelJobRunner final : public JobRunner {
 public:
  explicit ModelJobRunner(ModelJobRunnerOptions options);
  ~ModelJobRunner() override;
  ModelJobRunner(const ModelJobRunner&) = delete;
  ModelJobRunner& operator=(const ModelJobRunner&) = delete;

  std::string_view kind() const override { return "model"; }
  bool accepts(const JobSpec& job) const override { return job.model.has_value(); }
  int slots() const override { return 1; }
  bool exclusive() const override { return true; }
  void start(const protocol::Job& job, std::chrono::milliseconds timeout, JobDone done) override;
  CancelEffect cancel(const std::string& job_id, int attempt) override;
  void shutdown() override;

 private:
  void loop();
  ResultRecord run(const HeldJob& h);
  // The pipeline's folder (written once, named by the hash of its files), or "" when it cannot be.
  std::string pipeline_dir();

  const ModelJobRunnerOptions options_;
  std::string pipeline_dir_;  // loop thread only

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<HeldJob> queue_;
  std::optional<JobKey> running_;
  pid_t group_ = -1;        // the running step's process group
  bool cancelled_ = false;  // the running job was cancelled
  bool shutdown_ = false;
  std::thread thread_;
};

}  // namespace ak
