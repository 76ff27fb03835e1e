// Test helpers for coordinator/scheduler.h: builders for jobs and capabilities, and a harness
// that feeds events to a Scheduler at a test-controlled time and checks its invariants after
// every event.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "coordinator/scheduler.h"

namespace ak::testing {

inline JobSpec make_job(std::string id, Backend backend = Backend::kCpu, std::string gpu_model = "",
                        std::string arch = "") {
  JobSpec s;
  s.job_id = std::move(id);
  s.campaign_id = "c1";
  s.kernel_type = "softmax";
  s.requires_.backend = backend;
  s.requires_.gpu_model = std::move(gpu_model);
  s.requires_.arch = std::move(arch);
  return s;
}

inline Capabilities cpu_caps() {
  Capabilities c;
  c.gpu_name = "cpu";
  c.arch = "x86_64";
  c.backends = {Backend::kCpu};
  return c;
}

inline Capabilities gpu_caps(std::string name, std::string arch) {
  Capabilities c;
  c.gpu_name = std::move(name);
  c.arch = std::move(arch);
  c.backends = {Backend::kCuda, Backend::kCpu};
  return c;
}

template <typename T>
std::vector<T> only(const std::vector<Action>& actions) {
  std::vector<T> out;
  for (const auto& a : actions)
    if (const T* t = std::get_if<T>(&a)) out.push_back(*t);
  return out;
}

// Job ids of the SendJob actions for `worker` (all workers when empty), in order.
inline std::vector<std::string> sent_ids(const std::vector<Action>& actions,
                                         const std::string& worker = "") {
  std::vector<std::string> ids;
  for (const auto& s : only<SendJob>(actions))
    if (worker.empty() || s.worker_id == worker) ids.push_back(s.job.spec.job_id);
  return ids;
}

class SchedulerHarness {
 public:
  explicit SchedulerHarness(SchedulerOptions o = default_options()) : sched(o) {}

  static SchedulerOptions default_options() {
    SchedulerOptions o;
    o.lease_ms = 1'000;
    o.worker_timeout_ms = 5'000;
    o.max_attempts = 3;
    return o;
  }

  std::vector<Action> submit(std::vector<JobSpec> jobs) {
    auto r = sched.submit(std::move(jobs), now);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return checked(r.ok() ? r.value() : std::vector<Action>{});
  }
  std::vector<Action> ready(const std::string& worker, int slots, Capabilities caps = cpu_caps()) {
    return checked(sched.on_ready({worker, std::move(caps), slots}, now));
  }
  std::vector<Action> heartbeat(const std::string& worker, std::vector<protocol::InFlight> jobs = {}) {
    return checked(sched.on_heartbeat({worker, std::move(jobs)}, now));
  }
  std::vector<Action> result(const std::string& worker, const std::string& job, int attempt,
                             ResultStatus status = ResultStatus::kPass) {
    ResultRecord r;
    r.job_id = job;
    r.attempt = attempt;
    r.status = status;
    r.worker_id = worker;
    return checked(sched.on_result({worker, r}, now));
  }
  std::vector<Action> disconnect(const std::string& worker, const std::string& reason) {
    return checked(sched.on_disconnect({worker, reason}, now));
  }
  std::vector<Action> tick(int64_t advance_ms = 0) {
    now += advance_ms;
    return checked(sched.on_tick(now));
  }
  std::vector<Action> commit(const std::string& job) {
    return checked(sched.commit_result(job, now));
  }
  // on_result followed by the commit a successful store write leads to.
  std::vector<Action> result_committed(const std::string& worker, const std::string& job,
                                       int attempt, ResultStatus status = ResultStatus::kPass) {
    auto a = result(worker, job, attempt, status);
    auto c = commit(job);
    a.insert(a.end(), c.begin(), c.end());
    return a;
  }

  const JobRecord& job(const std::string& id) const { return sched.jobs().at(id); }

  std::vector<Action> checked(std::vector<Action> actions) {
    Status s = sched.check_invariants(now);
    EXPECT_TRUE(s.ok()) << s.to_string();
    return actions;
  }

  Scheduler sched;
  int64_t now = 1'000'000;
};

}  // namespace ak::testing
