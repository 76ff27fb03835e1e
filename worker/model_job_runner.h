// ModelJobRunner: the JobRunner (worker/job_runner.h) for model jobs (JobSpec::model,
// models/README.md). A job is one Python step (worker/python_step.h) of the model pipeline, written
// from the binary into the work folder, run in the job's own folder with the worker's Python and
// device, confined like a candidate, bounded by the job's timeout:
//   - profile: profile_model.py; exit 0 with a profile: PASS, the profile in ResultRecord::model;
//   - verify: the tuned kernels of the job (ModelTask::tuned) for this worker's GPU model and
//     backend are compiled by the worker's compiler (confined, cached) and copied into the job's
//     folder with a manifest; verify_model.py plugs them into the model through
//     libautokernel_ops.so (models/plug/ops.cc) and writes its report: exit 0, PASS with the report
//     in ResultRecord::model; the tuned model's outputs wrong (exit 6): FAIL at stage "verify", the
//     report kept. A tuned kernel that does not compile is left out and named in the report
//     ("kernels_skipped"); so is one of another GPU model or backend.
//   - the model cannot be loaded (exit 3), ran out of GPU memory (4) or raised (5): FAIL at stage
//     "model", the reason the script gave (the last line of its stderr);
//   - past the timeout: TIMEOUT, its process group killed; any other end: CRASH with the log's tail.
//   - cancel(): a waiting job ends CANCELLED at once, a running one's step is killed and it ends
//     CANCELLED; shutdown(): waiting jobs are dropped without a result, a running one finishes.
// One slot, and exclusive (JobRunner::exclusive): the agent runs a model job with no other job of
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

#include <memory>

#include "common/confine.h"
#include "worker/compiler.h"
#include "worker/job_runner.h"

namespace ak {

struct ModelJobRunnerOptions {
  std::string python = "python3";  // with torch
  std::string work_dir;            // the pipeline's files and the job folders go under it
  std::string device = "cpu";      // "cuda:<ordinal>" or "cpu"
  Ceilings ceilings;               // the worker's, for the profile's roofline (none measured: no bound)
  ConfinementPolicy confinement;
  bool keep_job_dirs = false;  // keep each job's folder (files, logs) after the run
  // verify: the worker's backend and capabilities (GPU name, architecture), the compiler's options
  // (the worker's compile cache) and libautokernel_ops.so (empty: ../lib/ of this process's
  // executable, as installed, else the one beside it, as built).
  Backend backend = Backend::kCpu;
  Capabilities caps;
  CompilerOptions compiler;
  std::string ops_library;
};

// The tuned kernels of a tuning-database export (`autokernel best --export` entries) that a
// worker of `backend` with `caps` can run, compiled by `compiler` and copied into kernels_dir
// (k<i>.cubin, with a Triton kernel's <stem>.json and .div16.* siblings): `entries` as the
// manifest of libautokernel_ops.so lists them (models/plug/ops.cc), `skipped` each entry left out
// with its reason (another GPU model or backend, an unknown type, no faster than PyTorch's op by
// more than min_speedup, a configuration that reads TMA tensor maps (kernels/registry.h) where the
// consumer builds none (tensor_maps false), does not compile). Used by verify jobs (the torch
// library builds the maps: models/plug/ops.cc) and `autokernel export --hf` (whose package does
// not).
struct PreparedKernels {
  nlohmann::json entries = nlohmann::json::array();
  nlohmann::json skipped = nlohmann::json::array();
};
Result<PreparedKernels> compile_tuned_kernels(Compiler& compiler, const nlohmann::json& tuned, Backend backend,
                                              const Capabilities& caps, double min_speedup,
                                              const std::string& kernels_dir, bool tensor_maps);

// libautokernel_ops.so: in ../lib/ of this process's executable (an installed tree), else beside it
// (the build tree).
std::string default_ops_library();

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
  // verify: compiles the job's tuned kernels into dir/kernels and writes dir/plug.json; returns
  // the entries left out, each with its reason.
  Result<nlohmann::json> prepare_kernels(const ModelTask& t, const std::string& dir);
  // The pipeline's folder (written once, named by the hash of its files), or "" when it cannot be.
  std::string pipeline_dir();

  const ModelJobRunnerOptions options_;
  std::string pipeline_dir_;  // loop thread only
  std::unique_ptr<Compiler> compiler_;  // loop thread only; made at the first verify job

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
