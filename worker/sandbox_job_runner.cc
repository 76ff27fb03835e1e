#include "worker/sandbox_job_runner.h"

#include <algorithm>

#include <spdlog/spdlog.h>

namespace ak {

SandboxJobRunner::SandboxJobRunner(SandboxJobRunnerOptions options, Capabilities caps, Clock& clock,
                                   std::unique_ptr<Compiler> compiler, std::unique_ptr<SandboxRunner> sandbox)
    : options_(std::move(options)),
      caps_(std::move(caps)),
      clock_(clock),
      compiler_(std::move(compiler)),
      sandbox_(std::move(sandbox)) {
  options_.slots = std::max(1, options_.slots);
  options_.compile_threads = std::max(1, options_.compile_threads);
  for (int i = 0; i < options_.compile_threads; ++i) threads_.emplace_back([this] { compile_loop(); });
  threads_.emplace_back([this] { execute_loop(); });
}

SandboxJobRunner::~SandboxJobRunner() {
  shutdown();
  for (auto& t : threads_) t.join();
}

void SandboxJobRunner::start(const protocol::Job& job, std::chrono::milliseconds timeout, JobDone done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!shutdown_) {
      compile_queue_.push_back(Held{job, timeout, std::move(done)});
      count_compile_queue();
      compile_cv_.notify_one();
      return;
    }
  }
  done(std::nullopt);
}

CancelEffect SandboxJobRunner::cancel(const std::string& job_id, int attempt) {
  const Key key{job_id, attempt};
  JobDone dropped;
  CancelEffect effect = CancelEffect::kNotHeld;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto waiting =
        std::find_if(compile_queue_.begin(), compile_queue_.end(), [&](const Held& h) { return h.key() == key; });
    auto compiled =
        std::find_if(run_queue_.begin(), run_queue_.end(), [&](const Compiled& c) { return c.held.key() == key; });
    if (waiting != compile_queue_.end()) {
      dropped = std::move(waiting->done);
      compile_queue_.erase(waiting);
      count_compile_queue();
      effect = CancelEffect::kDropped;
    } else if (compiled != run_queue_.end()) {
      dropped = std::move(compiled->held.done);
      run_queue_.erase(compiled);
      effect = CancelEffect::kDropped;
    } else if (compiling_.count(key)) {
      cancelled_while_compiling_.insert(key);  // its compile ends CANCELLED instead of being measured
      effect = CancelEffect::kStopping;
    } else if (measuring_ == key) {
      effect = CancelEffect::kFinishing;
    }
  }
  if (dropped) dropped(cancelled_before_measurement("worker"));
  return effect;
}

void SandboxJobRunner::shutdown() {
  std::vector<JobDone> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_ = true;
    for (auto& h : compile_queue_) dropped.push_back(std::move(h.done));
    for (auto& c : run_queue_) dropped.push_back(std::move(c.held.done));
    compile_queue_.clear();
    count_compile_queue();
    run_queue_.clear();
  }
  compile_cv_.notify_all();
  run_cv_.notify_all();
  for (auto& done : dropped) done(std::nullopt);
}

ResultRecord SandboxJobRunner::compile_failure(const Held& h, const std::optional<Result<CompiledArtifact>>& art,
                                               const std::string& crash, int64_t t0_ms) const {
  ResultRecord r;
  r.stage = "compile";
  r.m.compile_ms = static_cast<double>(clock_.now_ms() - t0_ms);
  if (!crash.empty()) {
    r.status = ResultStatus::kCrash;
    r.reason = crash;
    spdlog::error("worker {}: job {} attempt {}: {}", options_.worker_id, h.job.spec.job_id, h.job.attempt, crash);
  } else if (art->status().code() == StatusCode::kInvalidArgument) {
    r.status = ResultStatus::kCompileError;
    r.reason = art->status().message();
  } else if (art->status().code() == StatusCode::kTimedOut) {
    r.status = ResultStatus::kTimeout;
    r.reason = art->status().message() + " (timeout_ms " + std::to_string(h.job.spec.timeout_ms) + ")";
  } else {
    // Not the candidate's fault (cache directory, missing toolchain ...): report it as such.
    r.status = ResultStatus::kCrash;
    r.reason = "compiler failed: " + art->status().to_string();
    spdlog::error("worker {}: job {}: {}", options_.worker_id, h.job.spec.job_id, r.reason);
  }
  return r;
}

void SandboxJobRunner::count_compile_queue() {
  if (options_.stats) options_.stats->compile_queue = static_cast<int64_t>(compile_queue_.size());
}

void SandboxJobRunner::compile_loop() {
  for (;;) {
    Held h;
    {
      std::unique_lock<std::mutex> lock(mu_);
      compile_cv_.wait(lock, [&] { return shutdown_ || !compile_queue_.empty(); });
      if (shutdown_) break;
      h = std::move(compile_queue_.front());
      compile_queue_.pop_front();
      count_compile_queue();
      compiling_.insert(h.key());
    }
    const int64_t t0 = clock_.now_ms();
    std::optional<Result<CompiledArtifact>> art;
    std::string crash;
    try {
      art.emplace(compiler_->compile(h.job.spec, caps_));
    } catch (const std::exception& e) {
      crash = std::string("compiler threw: ") + e.what();
    } catch (...) {
      crash = "compiler threw a non-standard exception";
    }
    std::optional<ResultRecord> result;
    {
      std::lock_guard<std::mutex> lock(mu_);
      compiling_.erase(h.key());
      if (art && art->ok() && options_.stats)
        ((*art)->cache_hit ? options_.stats->compile_cache_hits : options_.stats->compile_cache_misses).fetch_add(1);
      const bool cancelled = cancelled_while_compiling_.erase(h.key()) > 0;
      if (art && art->ok()) {
        // A build that succeeded with the PTX assembler's notes (a wgmma path serialised, registers
        // lowered): the operator's clue when a candidate times slower than its design.
        if (const std::string notes = ptxas_notes((*art)->diagnostics); !notes.empty())
          spdlog::info("worker {}: job {}: the PTX assembler's notes: {}", options_.worker_id, h.job.spec.job_id,
                       notes);
        if (cancelled) {
          result = cancelled_before_measurement("compile");  // never measured
        } else if (!shutdown_) {
          // The compile counts in the job's timeout: the sandbox gets what is left of it.
          const auto spent = std::chrono::milliseconds(clock_.now_ms() - t0);
          h.timeout = std::max(std::chrono::milliseconds(1), h.timeout - spent);
          run_queue_.push_back(Compiled{std::move(h), std::move(art->value())});
          run_cv_.notify_one();
          continue;
        }
        // else: shutting down; dropped without a result
      } else {
        result = compile_failure(h, art, crash, t0);
      }
    }
    h.done(std::move(result));
  }
}

void SandboxJobRunner::execute_loop() {
  for (;;) {
    Compiled c;
    {
      std::unique_lock<std::mutex> lock(mu_);
      run_cv_.wait(lock, [&] { return shutdown_ || !run_queue_.empty(); });
      if (shutdown_) break;
      c = std::move(run_queue_.front());
      run_queue_.pop_front();
      measuring_ = c.held.key();
    }
    SandboxRequest req;
    req.job = c.held.job.spec;
    req.artifact_path = c.artifact.path;
    req.entry = c.artifact.entry;
    req.compile_ms = c.artifact.compile_ms;
    SandboxReply reply;
    try {
      reply = sandbox_->run(req, c.held.timeout);
    } catch (const std::exception& e) {
      reply = SandboxReply{ResultStatus::kCrash, "sandbox", std::string("sandbox runner threw: ") + e.what(), {}};
    } catch (...) {
      reply = SandboxReply{ResultStatus::kCrash, "sandbox", "sandbox runner threw a non-standard exception", {}};
    }
    ResultRecord r;
    r.status = reply.status;
    r.stage = reply.stage;
    r.reason = reply.reason;
    r.m = reply.m;
    r.m.compile_ms = c.artifact.compile_ms;
    r.source_hash = c.artifact.source_hash;
    r.options_hash = c.artifact.options_hash;
    {
      std::lock_guard<std::mutex> lock(mu_);
      measuring_.reset();
    }
    c.held.done(std::move(r));
  }
}

}  // namespace ak
