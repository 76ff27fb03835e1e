#include "worker/kernelbench_job_runner.h"

#include <algorithm>

namespace ak {

KernelBenchJobRunner::KernelBenchJobRunner(KernelBenchJobRunnerOptions options) {
  const int n = std::max(1, options.slots);
  slots_.resize(static_cast<size_t>(n));
  for (auto& s : slots_) s.runner = std::make_unique<KernelBenchRunner>(options.runner);
  for (auto& s : slots_) threads_.emplace_back([this, &s] { loop(s); });
}

KernelBenchJobRunner::~KernelBenchJobRunner() {
  shutdown();
  for (auto& t : threads_) t.join();
}

void KernelBenchJobRunner::start(const protocol::Job& job, std::chrono::milliseconds timeout, JobDone done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!shutdown_) {
      queue_.push_back(Held{job, timeout, std::move(done)});
      cv_.notify_one();
      return;
    }
  }
  done(std::nullopt);
}

CancelEffect KernelBenchJobRunner::cancel(const std::string& job_id, int attempt) {
  const Key key{job_id, attempt};
  JobDone dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = std::find_if(queue_.begin(), queue_.end(), [&](const Held& h) { return h.key() == key; });
    if (it != queue_.end()) {
      dropped = std::move(it->done);
      queue_.erase(it);
    } else {
      // A slot claims its job under mu_, so a job is either queued here or claimed by a slot.
      for (auto& s : slots_)
        if (s.claimed == key) return s.runner->cancel(job_id) ? CancelEffect::kStopping : CancelEffect::kNotHeld;
      return CancelEffect::kNotHeld;
    }
  }
  dropped(cancelled_before_measurement("worker"));
  return CancelEffect::kDropped;
}

void KernelBenchJobRunner::shutdown() {
  std::deque<Held> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_ = true;
    dropped.swap(queue_);
  }
  cv_.notify_all();
  for (auto& h : dropped) h.done(std::nullopt);
}

void KernelBenchJobRunner::loop(Slot& slot) {
  for (;;) {
    Held h;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return shutdown_ || !queue_.empty(); });
      if (shutdown_) break;
      h = std::move(queue_.front());
      queue_.pop_front();
      slot.claimed = h.key();
      slot.runner->claim(h.job.spec.job_id);  // under mu_: a cancel finds the job queued or here
    }
    KernelBenchOutcome o;
    try {
      o = slot.runner->run(h.job.spec, h.timeout);
    } catch (const std::exception& e) {
      o.status = ResultStatus::kCrash;
      o.stage = "kernelbench";
      o.reason = std::string("KernelBench runner threw: ") + e.what();
    } catch (...) {
      o.status = ResultStatus::kCrash;
      o.stage = "kernelbench";
      o.reason = "KernelBench runner threw a non-standard exception";
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      slot.claimed.reset();
    }
    ResultRecord r;
    r.status = o.status;
    r.stage = o.stage;
    r.reason = o.reason;
    r.m = o.m;
    r.kernelbench = std::move(o.kernelbench);
    h.done(std::move(r));
  }
}

}  // namespace ak
