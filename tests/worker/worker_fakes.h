// Fakes shared by the tests of the worker agent and its job runners: an event log to wait on, a
// compiler and a sandbox runner that record what they do and hold a job until the test releases
// it, and a JobRunner for one kind of job whose jobs end when the test says.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "worker/compiler.h"
#include "worker/job_runner.h"
#include "worker/supervisor.h"

namespace ak::fakes {

constexpr std::chrono::milliseconds kPatience{10'000};

// Waits for a condition that another thread makes true, bounded by kPatience.
class Events {
 public:
  void record(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    seen_.push_back(what);
    cv_.notify_all();
  }
  bool wait_for(const std::string& what) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kPatience, [&] { return count_locked(what) > 0; });
  }
  int count(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    return count_locked(what);
  }

 private:
  int count_locked(const std::string& what) const {
    return static_cast<int>(std::count(seen_.begin(), seen_.end(), what));
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> seen_;
};

// Holds the jobs named by block() until release().
class Gate {
 public:
  void block(const std::string& job_id) {
    std::lock_guard<std::mutex> lock(mu_);
    blocked_.insert(job_id);
  }
  void release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  void pass(const std::string& job_id) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return released_ || !blocked_.count(job_id); });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::set<std::string> blocked_;
  bool released_ = false;
};

// Records "compiling <id>" and "compiled <id>"; a blocked job waits in between. Source "bad" fails
// to compile, "throw" throws; anything else compiles.
class FakeCompiler final : public Compiler {
 public:
  explicit FakeCompiler(Events& events) : events_(events) {}
  Result<CompiledArtifact> compile(const JobSpec& job, const Capabilities& caps) override {
    events_.record("compiling " + job.job_id);
    gate_.pass(job.job_id);
    events_.record("compiled " + job.job_id);
    if (job.source == "bad") return Status::invalid("softmax.cu(3): error: expected a ';'");
    if (job.source == "throw") throw std::runtime_error("compiler exploded");
    CompiledArtifact a;
    a.path = "/cache/" + job.job_id + ".so";
    // "mode:<m>" sources tell the fake sandbox (tests/worker/fake_sandbox.cc) how to behave.
    a.entry = job.source.rfind("mode:", 0) == 0 ? job.source.substr(5) : "softmax_" + caps.arch;
    a.source_hash = "src-" + job.job_id;
    a.options_hash = "opt-" + job.job_id;
    a.compile_ms = 12.5;
    return a;
  }
  Gate& gate() { return gate_; }

 private:
  Events& events_;
  Gate gate_;
};

// Records "running <id>" and "ran <id>"; a blocked job waits in between. Source "throw-in-sandbox"
// throws; anything else passes at 4 us.
class FakeSandbox final : public SandboxRunner {
 public:
  explicit FakeSandbox(Events& events) : events_(events) {}
  SandboxReply run(const SandboxRequest& req, std::chrono::milliseconds timeout) override {
    events_.record("running " + req.job.job_id);
    gate_.pass(req.job.job_id);
    if (req.job.source == "throw-in-sandbox") throw std::runtime_error("runner exploded");
    SandboxReply r;
    r.status = ResultStatus::kPass;
    r.stage = "measure";
    r.reason = req.artifact_path + " " + req.entry + " timeout " + std::to_string(timeout.count());
    r.m.latency_us = 4.0;
    events_.record("ran " + req.job.job_id);
    return r;
  }
  void block(const std::string& job_id) { gate_.block(job_id); }
  void release() { gate_.release(); }

 private:
  Events& events_;
  Gate gate_;
};

// A JobRunner for the jobs whose kernel_type is `kind`, with `slots` slots. Records
// "<kind> started <id>" and "<kind> cancel <id>"; a job ends when the test calls end().
class FakeJobRunner final : public JobRunner {
 public:
  FakeJobRunner(Events& events, std::string kind, int slots, bool exclusive = false)
      : events_(events), kind_(std::move(kind)), slots_(slots), exclusive_(exclusive) {}
  std::string_view kind() const override { return kind_; }
  bool accepts(const JobSpec& job) const override { return job.kernel_type == kind_; }
  int slots() const override { return slots_; }
  bool exclusive() const override { return exclusive_; }
  void start(const protocol::Job& job, std::chrono::milliseconds, JobDone done) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      held_[job.spec.job_id] = std::move(done);
    }
    events_.record(kind_ + " started " + job.spec.job_id);
  }
  CancelEffect cancel(const std::string& job_id, int) override {
    events_.record(kind_ + " cancel " + job_id);
    std::lock_guard<std::mutex> lock(mu_);
    return held_.count(job_id) ? CancelEffect::kStopping : CancelEffect::kNotHeld;
  }
  void shutdown() override {
    std::map<std::string, JobDone> dropped;
    {
      std::lock_guard<std::mutex> lock(mu_);
      dropped.swap(held_);
    }
    for (auto& [id, done] : dropped) done(std::nullopt);
  }
  // Ends a started job with `r` (from the test's thread, as a runner's thread would).
  void end(const std::string& job_id, ResultRecord r) {
    JobDone done;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = held_.find(job_id);
      if (it == held_.end()) throw std::logic_error(kind_ + " does not hold job " + job_id);
      done = std::move(it->second);
      held_.erase(it);
    }
    done(std::move(r));
  }

 private:
  Events& events_;
  const std::string kind_;
  const int slots_;
  const bool exclusive_;
  std::mutex mu_;
  std::map<std::string, JobDone> held_;
};

}  // namespace ak::fakes
