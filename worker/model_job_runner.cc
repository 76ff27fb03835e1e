#include "worker/model_job_runner.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "common/file.h"
#include "common/hash.h"
#include "common/process.h"
#include "common/tuning.h"
#include "kernels/registry.h"
#include "models/pipeline_source.h"
#include "worker/python_step.h"

namespace ak {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr size_t kMaxProfileBytes = 8 << 20;  // a profile is tens of KiB; more is not one

std::string last_line(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  const size_t nl = s.rfind('\n');
  return nl == std::string::npos ? s : s.substr(nl + 1);
}

ResultRecord failed(ResultStatus status, std::string reason) {
  ResultRecord r;
  r.status = status;
  r.stage = "model";
  r.reason = std::move(reason);
  return r;
}

}  // namespace

ModelJobRunner::ModelJobRunner(ModelJobRunnerOptions options) : options_(std::move(options)) {
  thread_ = std::thread([this] { loop(); });
}

ModelJobRunner::~ModelJobRunner() {
  shutdown();
  thread_.join();
}

void ModelJobRunner::start(const protocol::Job& job, std::chrono::milliseconds timeout, JobDone done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!shutdown_) {
      queue_.push_back(HeldJob{job, timeout, std::move(done)});
      cv_.notify_one();
      return;
    }
  }
  done(std::nullopt);
}

CancelEffect ModelJobRunner::cancel(const std::string& job_id, int attempt) {
  const JobKey key{job_id, attempt};
  JobDone dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = std::find_if(queue_.begin(), queue_.end(), [&](const HeldJob& h) { return h.key() == key; });
    if (it == queue_.end()) {
      if (running_ != key) return CancelEffect::kNotHeld;
      cancelled_ = true;
      if (group_ > 0) kill_process_group(group_);
      return CancelEffect::kStopping;
    }
    dropped = std::move(it->done);
    queue_.erase(it);
  }
  dropped(cancelled_before_measurement("worker"));
  return CancelEffect::kDropped;
}

void ModelJobRunner::shutdown() {
  std::deque<HeldJob> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_ = true;
    dropped.swap(queue_);
  }
  cv_.notify_all();
  for (auto& h : dropped) h.done(std::nullopt);
}

void ModelJobRunner::loop() {
  for (;;) {
    HeldJob h;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return shutdown_ || !queue_.empty(); });
      if (shutdown_) break;
      h = std::move(queue_.front());
      queue_.pop_front();
      running_ = h.key();
      cancelled_ = false;
    }
    ResultRecord r;
    try {
      r = run(h);
    } catch (const std::exception& e) {
      r = failed(ResultStatus::kCrash, std::string("model runner threw: ") + e.what());
    } catch (...) {
      r = failed(ResultStatus::kCrash, "model runner threw a non-standard exception");
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      running_.reset();
    }
    h.done(std::move(r));
  }
}

std::string default_ops_library() {
  std::error_code ec;
  const std::string installed = self_exe_dir() + "/../lib/libautokernel_ops.so";
  return fs::exists(installed, ec) ? installed : self_exe_dir() + "/libautokernel_ops.so";
}

Result<PreparedKernels> compile_tuned_kernels(Compiler& compiler, const json& tuned, Backend backend,
                                              const Capabilities& caps, double min_speedup,
                                              const std::string& kernels_dir, bool tensor_maps) {
  const fs::path kdir(kernels_dir);
  std::error_code ec;
  fs::create_directories(kdir, ec);
  if (ec) return Status::internal("cannot create " + kdir.string() + ": " + ec.message());
  json entries = json::array(), skipped = json::array();
  size_t i = 0;
  for (const json& doc : tuned) {
    TunedEntry e;
    std::string why;
    try {
      e = doc.get<TunedEntry>();
    } catch (const std::exception& ex) {
      skipped.push_back({{"entry", i++}, {"reason", std::string("not a tuning entry: ") + ex.what()}});
      continue;
    }
    const bool ours = backend == Backend::kCpu ? e.backend == Backend::kCpu : e.backend != Backend::kCpu;
    const kernels::KernelSpec* spec = kernels::find(e.kernel_type);
    if (!same_gpu_model(e.gpu_model, caps.gpu_name))
      why = "tuned on " + e.gpu_model + ", this worker is " + caps.gpu_name;
    else if (!ours)
      why = "a " + std::string(backend_name(e.backend)) + " kernel; this worker runs " + backend_name(backend);
    else if (!spec)
      why = "unknown kernel type '" + e.kernel_type + "'";
    else if (e.m.speedup <= min_speedup)
      why = "no faster than PyTorch's op where it was tuned (" + std::to_string(e.m.speedup).substr(0, 5) +
            "x; min_speedup " + std::to_string(min_speedup).substr(0, 4) + ")";
    else if (!tensor_maps && e.backend == Backend::kCuda &&
             kernels::reads_tensor_maps(*spec, e.config, e.shape, e.dtype))
      // Its tuned figure came with the maps the sandbox builds; without them the kernel would run
      // its slower fallback under the tuned figure's name.
      why = "its configuration reads TMA tensor maps, which an exported package does not build";
    JobSpec job;
    if (why.empty()) {
      job.job_id = "verify-" + std::to_string(i);
      job.kernel_type = e.kernel_type;
      job.source = e.source;
      job.config = e.config;
      job.shape = e.shape;
      job.dtype = e.dtype;
      job.requires_.backend = e.backend;
      auto art = compiler.compile(job, caps);
      if (!art.ok()) {
        why = "does not compile here: " + art.status().message().substr(0, 500);
      } else {
        // The artefact and its siblings of one stem (triton: <stem>.json, <stem>.div16.*), copied
        // into the job's folder, the step's only view of the worker's files.
        const fs::path src(art->path);
        const std::string stem = src.stem().string();
        const std::string mine = "k" + std::to_string(i);
        for (const std::string& suffix : {src.extension().string(), std::string(".json"), std::string(".div16.cubin"),
                                          std::string(".div16.json")}) {
          const fs::path from = src.parent_path() / (stem + suffix);
          if (suffix != src.extension().string() && !fs::exists(from, ec)) continue;
          fs::copy_file(from, kdir / (mine + suffix), fs::copy_options::overwrite_existing, ec);
          if (ec) return Status::internal("cannot copy " + from.string() + ": " + ec.message());
        }
        entries.push_back({{"kernel_type", e.kernel_type},
                           {"backend", backend_name(e.backend)},
                           {"dtype", dtype_name(e.dtype)},
                           {"shape", e.shape},
                           {"config", e.config},
                           {"artifact", (kdir / (mine + src.extension().string())).string()},
                           {"entry", art->entry},
                           {"latency_us", e.m.latency_us},
                           {"baseline_us", e.m.baseline_us},
                           {"speedup", e.m.speedup},
                           {"job_id", e.job_id}});
      }
    }
    if (!why.empty())
      skipped.push_back({{"entry", i}, {"kernel_type", e.kernel_type}, {"shape", e.shape}, {"reason", why}});
    ++i;
  }
  return PreparedKernels{std::move(entries), std::move(skipped)};
}

Result<json> ModelJobRunner::prepare_kernels(const ModelTask& t, const std::string& dir) {
  if (!compiler_) {
    compiler_ = make_compiler(options_.compiler);
    if (!compiler_) return Status::internal("cannot make the worker's compiler");
  }
  // The torch library builds the maps (models/plug/ops.cc).
  auto prepared = compile_tuned_kernels(*compiler_, t.tuned, options_.backend, options_.caps, t.min_speedup,
                                        (fs::path(dir) / "kernels").string(), true);
  if (!prepared.ok()) return prepared.status();
  const json manifest = {{"device", options_.device}, {"arch", options_.caps.arch}, {"entries", prepared->entries}};
  if (Status s = write_file((fs::path(dir) / "plug.json").string(), manifest.dump(1)); !s.ok()) return s;
  return prepared->skipped;
}

std::string ModelJobRunner::pipeline_dir() {
  if (!pipeline_dir_.empty()) return pipeline_dir_;
  std::string all;
  for (const auto& f : models::pipeline_files()) all += std::string(f.path) + '\0' + std::string(f.text) + '\0';
  std::error_code ec;
  fs::create_directories(options_.work_dir, ec);
  // What workers killed with SIGKILL left: their copies and job folders.
  remove_leftovers_of_dead_processes_once(options_.work_dir, "models-");
  remove_leftovers_of_dead_processes_once((fs::path(options_.work_dir) / "model-jobs").string(), "");
  // models-<pid>-<xxh64 of the files>: another version is never taken for this one; written
  // beside and renamed, so no step reads a half-written folder.
  const fs::path dir = fs::path(options_.work_dir) / ("models-" + std::to_string(getpid()) + "-" + xxh64_hex(all));
  if (fs::exists(dir / "profile_model.py", ec)) return pipeline_dir_ = dir.string();
  const fs::path tmp = dir.string() + ".tmp";
  fs::remove_all(tmp, ec);
  for (const auto& f : models::pipeline_files()) {
    const fs::path p = tmp / std::string(f.path);
    fs::create_directories(p.parent_path(), ec);
    if (!write_file(p.string(), std::string(f.text)).ok()) return "";
  }
  fs::rename(tmp, dir, ec);
  if (ec) return "";
  return pipeline_dir_ = dir.string();
}

ResultRecord ModelJobRunner::run(const HeldJob& h) {
  const JobSpec& job = h.job.spec;
  if (!job.model) return failed(ResultStatus::kCrash, "not a model job (no 'model' task)");
  const ModelTask& t = *job.model;
  const auto deadline = std::chrono::steady_clock::now() + h.timeout;
  const std::string pipeline = pipeline_dir();
  static std::atomic<uint64_t> seq{0};
  // <pid>-<seq>-<job>: a later runner removes the folders of a worker killed with SIGKILL.
  const fs::path dir = fs::path(options_.work_dir) / "model-jobs" /
                       (std::to_string(getpid()) + "-" + std::to_string(seq.fetch_add(1)) + "-" + job.job_id);
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir, ec);
  if (ec || pipeline.empty())
    return failed(ResultStatus::kCrash, "cannot prepare " + dir.string() + " or the pipeline's files: " + ec.message());
  struct Cleanup {
    fs::path p;
    bool keep;
    ~Cleanup() {
      std::error_code e;
      if (!keep) fs::remove_all(p, e);
    }
  } cleanup{dir, options_.keep_job_dirs};

  std::string model = t.model;
  if (!t.model_code.empty()) {
    // The coordinator checked the name: a plain file name ending in .py.
    model = (dir / t.model).string();
    if (Status s = write_file(model, t.model_code); !s.ok()) return failed(ResultStatus::kCrash, s.message());
  }
  const bool verify = t.action == "verify";
  const fs::path out = dir / (verify ? "verify.json" : "profile.json");
  PythonStep step;
  step.python = options_.python;
  std::vector<std::string> read_only = {pipeline};
  json skipped = json::array();
  if (verify) {
    auto prepared = prepare_kernels(t, dir.string());
    if (!prepared.ok()) return failed(ResultStatus::kCrash, prepared.status().message());
    skipped = std::move(*prepared);
    // An installed tree has it in lib/ beside bin/, the build tree beside the executables.
    const std::string lib = options_.ops_library.empty() ? default_ops_library() : options_.ops_library;
    if (!fs::exists(lib, ec))
      return failed(ResultStatus::kCrash,
                    "the tuned kernels' torch library " + lib + " is missing; build target autokernel_ops");
    read_only.push_back(lib);
    if (Status s = write_file((dir / "targets.json").string(), json{{"targets", t.targets}}.dump()); !s.ok())
      return failed(ResultStatus::kCrash, s.message());
    step.args = {pipeline + "/verify_model.py",
                 "--manifest",
                 (dir / "plug.json").string(),
                 "--ops-lib",
                 lib,
                 "--profile",
                 (dir / "targets.json").string(),
                 "--decode-tokens",
                 std::to_string(t.decode_tokens)};
    if (!t.compile) step.args.push_back("--no-compile");
  } else {
    step.args = {pipeline + "/profile_model.py"};
    if (t.compile) step.args.push_back("--compile");
    const auto peak = options_.ceilings.gemm_tflops.find(t.dtype);
    if (peak != options_.ceilings.gemm_tflops.end() && peak->second > 0 && options_.ceilings.copy_bandwidth_gbps > 0) {
      step.args.insert(step.args.end(), {"--peak-tflops", std::to_string(peak->second), "--peak-gbps",
                                         std::to_string(options_.ceilings.copy_bandwidth_gbps)});
    }
  }
  // Both scripts take the model, the device, the dtype, the report's path and the rounds.
  step.args.insert(step.args.end(),
                   {"--model", model, "--device", options_.device, "--dtype", t.dtype, "--out", out.string(), "--iters",
                    std::to_string(t.iters), "--warmup", std::to_string(t.warmup)});
  step.dir = dir;
  step.log = dir / (verify ? "verify.log" : "profile.log");
  step.read_only = read_only;
  step.env = {"PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1"};
  step.cgroup_name = "model-" + std::to_string(getpid()) + "-" + dir.filename().string();
  const PythonStepOutcome o = run_python_step(
      step, options_.confinement, deadline,
      [&](pid_t group) {
        std::lock_guard<std::mutex> lock(mu_);
        group_ = group;
        return !cancelled_;
      },
      [&] {
        std::lock_guard<std::mutex> lock(mu_);
        group_ = -1;
      });
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (cancelled_) {
      ResultRecord r = failed(ResultStatus::kCancelled, "its campaign was cancelled while the model ran");
      return r;
    }
  }
  if (o.timed_out)
    return failed(ResultStatus::kTimeout, "the model's " + t.action + " ran past the job's timeout and was killed");
  json profile;
  std::error_code sz;
  const auto size = fs::file_size(out, sz);
  if (!sz && size <= kMaxProfileBytes) {
    if (auto text = read_file(out.string()); text.ok()) {
      profile = json::parse(*text, nullptr, /*allow_exceptions=*/false);
      if (profile.is_discarded() || !profile.is_object()) profile = json();
    }
  }
  const std::string log = read_tail(step.log.string(), 4000);
  if (verify && profile.is_object()) profile["kernels_skipped"] = skipped;
  const bool complete = verify ? profile.is_object() && profile.contains("outputs") && profile["outputs"].is_object()
                               : profile.is_object() && profile.contains("ops") && profile["ops"].is_array();
  if (o.exit_code == 0 && complete) {
    ResultRecord r;
    r.status = ResultStatus::kPass;
    r.model = std::move(profile);
    return r;
  }
  const std::string error = profile.is_object() && profile.contains("error") && profile["error"].is_string()
                                ? profile["error"].get<std::string>()
                                : last_line(log);
  if (verify && o.exit_code == 6) {
    ResultRecord r = failed(ResultStatus::kFail, error);
    r.stage = "verify";
    r.model = std::move(profile);
    return r;
  }
  if (o.exit_code == 3 || o.exit_code == 4 || o.exit_code == 5) {
    ResultRecord r = failed(ResultStatus::kFail, error);
    r.model = std::move(profile);  // the model, device and dtype beside the error
    return r;
  }
  return failed(ResultStatus::kCrash, "the model's " + t.action + " ended with exit " + std::to_string(o.exit_code) +
                                          " and no report: " + last_line(log));
}

}  // namespace ak
