#include "coordinator/scheduler.h"

#include <algorithm>
#include <cctype>
#include <tuple>
#include <utility>

namespace ak {

namespace {

SendError unknown_worker(const std::string& worker_id) {
  return SendError{worker_id,
                   {protocol::ErrorCode::kUnknownWorker,
                    "worker " + worker_id +
                        " is not registered with this coordinator; send READY"}};
}

}  // namespace

Scheduler::Scheduler(SchedulerOptions options) : options_(std::move(options)) {}

JobRecord Scheduler::finished_record(const JobRecord& job, JobState state) {
  JobRecord r = job;
  r.state = state;
  r.worker_id.clear();
  r.lease_expires_ms = 0;
  return r;
}

std::vector<Action> Scheduler::restore(const StoreSnapshot& snapshot, int64_t now_ms, int64_t wall_ms) {
  std::vector<Action> out;
  jobs_.clear();
  queue_.clear();
  workers_.clear();
  pending_results_.clear();
  by_status_.clear();
  orphan_leases_.clear();
  last_dispatched_worker_.clear();

  std::map<std::string, const ResultRecord*> stored;
  for (const auto& r : snapshot.results) {
    ++by_status_[r.status];
    stored.emplace(r.job_id, &r);
  }
  for (const auto& rec : snapshot.jobs) {
    JobRecord job = rec;
    const std::string& id = job.spec.job_id;
    // put_result writes the row and the final job record together, so a job with a row is
    // finished; trust the row if an older job record says otherwise.
    if (auto it = stored.find(id); it != stored.end() &&
                                   job.state != JobState::kDone && job.state != JobState::kLost) {
      job = finished_record(job, it->second->status == ResultStatus::kLost ? JobState::kLost
                                                                            : JobState::kDone);
    }
    if (job.state == JobState::kLeased && job.worker_id.empty()) job.state = JobState::kQueued;
    switch (job.state) {
      case JobState::kQueued:
        job.worker_id.clear();
        job.lease_expires_ms = 0;
        queue_.push_back(id);
        break;
      case JobState::kLeased: {
        // One lease from when a coordinator first found it orphaned: a worker that never comes
        // back does not keep the job through any number of restarts.
        if (job.orphaned_wall_ms <= 0 || job.orphaned_wall_ms > wall_ms) {
          job.orphaned_wall_ms = wall_ms;
          out.push_back(PersistJob{job});
        }
        const int64_t left =
            std::clamp<int64_t>(options_.lease_ms - (wall_ms - job.orphaned_wall_ms), 0, options_.lease_ms);
        job.lease_expires_ms = now_ms + left;
        orphan_leases_[job.worker_id].insert(id);
        break;
      }
      case JobState::kDone:
      case JobState::kLost:
        break;
    }
    jobs_[id] = std::move(job);
  }
  return out;
}

Result<std::vector<Action>> Scheduler::submit(std::vector<JobSpec> jobs, int64_t now_ms) {
  std::set<std::string> ids;
  for (const auto& spec : jobs) {
    if (spec.job_id.empty()) return Status::invalid("a submitted job has an empty job_id");
    if (jobs_.count(spec.job_id) || !ids.insert(spec.job_id).second) {
      return Status(StatusCode::kAlreadyExists,
                    "job " + spec.job_id +
                        " was submitted already; job ids must be unique; nothing was added");
    }
  }
  std::vector<Action> out;
  for (auto& spec : jobs) {
    JobRecord job;
    job.spec = std::move(spec);
    job.state = JobState::kQueued;
    const std::string id = job.spec.job_id;
    queue_.push_back(id);
    out.push_back(PersistJob{job});
    jobs_[id] = std::move(job);
  }
  dispatch(now_ms, &out);
  return out;
}

std::vector<Action> Scheduler::on_ready(const protocol::Ready& m, int64_t now_ms) {
  std::vector<Action> out;
  // A worker sends READY when it starts and when this coordinator does not know it: READY from a
  // registered worker is a new process under the same id, which holds none of its predecessor's
  // jobs. Those leases end now rather than at their expiry.
  if (workers_.count(m.worker_id))
    forget_worker(m.worker_id, "worker " + m.worker_id + " registered again (restarted)", now_ms, &out);
  WorkerView& w = workers_[m.worker_id];
  w.worker_id = m.worker_id;
  w.caps = m.caps;
  w.slots = std::max(0, m.slots);
  w.last_seen_ms = now_ms;
  // Leases restored after a coordinator restart belong to this worker again; its heartbeats
  // confirm them or release them.
  if (auto it = orphan_leases_.find(m.worker_id); it != orphan_leases_.end()) {
    for (const auto& id : it->second) {
      JobRecord& job = jobs_.at(id);
      w.leased.insert(id);
      w.unlisted[id] = 0;
      if (job.orphaned_wall_ms != 0) {
        job.orphaned_wall_ms = 0;
        out.push_back(PersistJob{job});
      }
    }
    orphan_leases_.erase(it);
  }
  // Jobs of a campaign cancelled while the worker was away (or before a restart): tell it now.
  for (const auto& id : w.leased) tell_to_stop(jobs_.at(id), now_ms, &out);
  if (static_cast<int>(w.leased.size()) > w.slots) {
    // The worker came back with fewer slots than the leases it held: keep as many as it now
    // has room for and requeue the rest.
    const size_t held = w.leased.size();
    std::vector<std::string> excess(std::next(w.leased.begin(), w.slots), w.leased.end());
    for (const auto& id : excess) {
      expire(jobs_.at(id),
             "worker " + m.worker_id + " re-registered with " + std::to_string(w.slots) +
                 " slots while holding " + std::to_string(held) + " leases",
             now_ms, &out);
    }
  }
  dispatch(now_ms, &out);
  return out;
}

std::vector<Action> Scheduler::on_heartbeat(const protocol::Heartbeat& m, int64_t now_ms) {
  auto wit = workers_.find(m.worker_id);
  if (wit == workers_.end()) return {unknown_worker(m.worker_id)};
  WorkerView& w = wit->second;
  w.last_seen_ms = now_ms;
  std::vector<Action> out;
  std::set<std::string> listed;
  for (const auto& f : m.in_flight) {
    auto it = jobs_.find(f.job_id);
    if (it == jobs_.end()) continue;
    JobRecord& job = it->second;
    if (job.state == JobState::kLeased && job.worker_id == m.worker_id && job.attempt == f.attempt) {
      job.lease_expires_ms = std::max(job.lease_expires_ms, now_ms + options_.lease_ms);
      listed.insert(f.job_id);
    }
    if (job.worker_id == m.worker_id) tell_to_stop(job, now_ms, &out);
  }
  // A lease its holder no longer lists is a phantom (the worker never got the job, or lost it):
  // the second such heartbeat since the lease was granted releases it.
  std::vector<std::string> phantoms;
  for (const auto& id : w.leased) {
    int& misses = w.unlisted[id];
    if (listed.count(id)) {
      misses = 0;
    } else if (!pending_results_.count(id) && ++misses >= 2) {
      phantoms.push_back(id);
    }
  }
  for (const auto& id : phantoms) {
    JobRecord& job = jobs_.at(id);
    expire(job,
           "worker " + m.worker_id + " no longer lists job " + id + " attempt " + std::to_string(job.attempt) +
               " in its heartbeats",
           now_ms, &out);
  }
  dispatch(now_ms, &out);
  return out;
}

std::vector<Action> Scheduler::on_result(const protocol::ResultMsg& m, int64_t now_ms, ResultRefusal* refusal) {
  (void)now_ms;
  if (refusal) *refusal = ResultRefusal::kNone;
  if (!workers_.count(m.worker_id)) return {unknown_worker(m.worker_id)};
  ResultRecord r = m.result;
  r.worker_id = m.worker_id;  // the row names the worker that reported it, whatever the body says
  const SendAck ack{m.worker_id, {r.job_id, r.attempt}};
  auto it = jobs_.find(r.job_id);
  if (it == jobs_.end()) {
    return {SendError{m.worker_id,
                      {protocol::ErrorCode::kBadRequest,
                       "worker " + m.worker_id + " sent a result for job '" + r.job_id +
                           "', which this coordinator does not know; drop it from the outbox"}}};
  }
  const JobRecord& job = it->second;
  if (job.state == JobState::kDone || job.state == JobState::kLost) return {ack};
  if (auto p = pending_results_.find(r.job_id);
      p != pending_results_.end() && p->second.attempt == r.attempt && p->second.worker_id == m.worker_id) {
    // This worker's row is on its way but unconfirmed (the write may have failed). Write it again
    // rather than acknowledging something that may not be stored.
    return {PersistResult{p->second, finished_record(job, JobState::kDone)}, ack};
  }
  if (r.attempt < 1) {
    return {SendError{m.worker_id,
                      {protocol::ErrorCode::kBadRequest,
                       "worker " + m.worker_id + " sent a result for job " + r.job_id +
                           " attempt " + std::to_string(r.attempt) +
                           "; attempts are numbered from 1"}}};
  }
  const bool holder = job.state == JobState::kLeased && job.worker_id == m.worker_id && job.attempt == r.attempt &&
                      !pending_results_.count(r.job_id);
  if (holder) {
    pending_results_[r.job_id] = r;
    return {PersistResult{r, finished_record(job, JobState::kDone)}, ack};
  }
  // Every delivery is stored before it is sent (FarmCore::execute), so a worker never holds an
  // attempt above the job's. An attempt at or below it that no one holds now is a lease that ended
  // (expired, released, its worker restarted): the worker may drop the result; the job's next
  // attempt reports instead.
  if (r.attempt <= job.attempt && !(job.state == JobState::kLeased && job.attempt == r.attempt)) {
    if (refusal) *refusal = ResultRefusal::kStaleAttempt;
    return {ack};
  }
  if (refusal) *refusal = ResultRefusal::kNotLeased;
  return {SendError{
      m.worker_id,
      {protocol::ErrorCode::kForbidden, "worker " + m.worker_id + " sent a result for job " + r.job_id + " attempt " +
                                            std::to_string(r.attempt) + ", which is not leased to it; not stored"}}};
}

std::vector<Action> Scheduler::on_disconnect(const protocol::Disconnect& m, int64_t now_ms) {
  std::vector<Action> out;
  const std::string reason = "worker " + m.worker_id + " disconnected: " + m.reason;
  if (workers_.count(m.worker_id)) forget_worker(m.worker_id, reason, now_ms, &out);
  if (auto it = orphan_leases_.find(m.worker_id); it != orphan_leases_.end()) {
    const std::set<std::string> ids = it->second;
    for (const auto& id : ids) expire(jobs_.at(id), reason, now_ms, &out);
  }
  dispatch(now_ms, &out);
  return out;
}

std::vector<Action> Scheduler::on_tick(int64_t now_ms) {
  std::vector<Action> out;
  last_tick_ms_ = std::max(last_tick_ms_, now_ms);

  // Rows that were never confirmed (the store was down): write them again. LOST rows have no
  // worker that would resend them, and the worker of a result may be gone.
  for (const auto& [id, r] : pending_results_) {
    const JobRecord& job = jobs_.at(id);
    out.push_back(PersistResult{r, finished_record(job, job.state == JobState::kLost
                                                            ? JobState::kLost
                                                            : JobState::kDone)});
  }

  std::vector<std::string> expired;
  for (const auto& [id, job] : jobs_) {
    if (job.state == JobState::kLeased && job.lease_expires_ms <= now_ms) expired.push_back(id);
  }
  for (const auto& id : expired) {
    JobRecord& job = jobs_.at(id);
    expire(job,
           "lease expired on worker " + job.worker_id + " at attempt " + std::to_string(job.attempt),
           now_ms, &out);
  }

  std::vector<std::string> silent;
  for (const auto& [id, w] : workers_) {
    if (now_ms - w.last_seen_ms > options_.worker_timeout_ms) silent.push_back(id);
  }
  for (const auto& id : silent) {
    ++heartbeats_missed_;
    forget_worker(id, "worker " + id + " went silent", now_ms, &out);
  }

  dispatch(now_ms, &out);
  return out;
}

std::vector<Action> Scheduler::commit_result(const std::string& job_id, int64_t now_ms) {
  std::vector<Action> out;
  auto p = pending_results_.find(job_id);
  if (p == pending_results_.end()) return out;
  ++by_status_[p->second.status];
  pending_results_.erase(p);
  cancel_sent_ms_.erase(job_id);
  JobRecord& job = jobs_.at(job_id);
  if (job.state == JobState::kLeased) release_lease(job);
  if (job.state == JobState::kQueued) {
    if (auto q = std::find(queue_.begin(), queue_.end(), job_id); q != queue_.end()) queue_.erase(q);
  }
  if (job.state != JobState::kLost) job = finished_record(job, JobState::kDone);
  dispatch(now_ms, &out);
  return out;
}

bool Scheduler::matches(const Requirements& r, const Capabilities& c) const {
  if (std::find(c.backends.begin(), c.backends.end(), r.backend) == c.backends.end()) return false;
  if (!r.gpu_model.empty() && !same_gpu_model(r.gpu_model, c.gpu_name)) return false;
  if (!r.arch.empty() && r.arch != c.arch) return false;
  return true;
}

Scheduler::Stranded Scheduler::stranded() const {
  // The queued jobs grouped by what they require; each distinct requirement is held against the
  // workers once. Counting by campaign takes a second pass, made only when some group is stranded
  // (every STATUS runs this; usually nothing is).
  using Key = std::tuple<Backend, std::string, std::string>;
  auto key_of = [](const Requirements& r) { return Key{r.backend, r.gpu_model, r.arch}; };
  std::map<Key, int64_t> by_requirements;
  for (const std::string& id : queue_) {
    if (pending_results_.count(id)) continue;  // parked: its result is on its way
    ++by_requirements[key_of(jobs_.at(id).spec.requires_)];
  }
  Stranded out;
  std::set<Key> stranded_keys;
  for (const auto& [key, n] : by_requirements) {
    const auto& [backend, gpu_model, arch] = key;
    Requirements r{backend, gpu_model, arch};
    bool backend_ok = false, model_ok = false, fits = false;
    for (const auto& [wid, w] : workers_) {
      Requirements partial{backend, "", ""};
      if (!matches(partial, w.caps)) continue;
      backend_ok = true;
      partial.gpu_model = gpu_model;
      if (!matches(partial, w.caps)) continue;
      model_ok = true;
      if (matches(r, w.caps)) {
        fits = true;
        break;
      }
    }
    if (fits) continue;
    const std::string need = !backend_ok ? std::string("backend ") + backend_name(backend)
                             : !model_ok ? "gpu_model " + gpu_model
                                         : "arch " + arch;
    out.by_need[need] += n;
    stranded_keys.insert(key);
  }
  if (stranded_keys.empty()) return out;
  for (const std::string& id : queue_) {
    if (pending_results_.count(id)) continue;
    const JobSpec& spec = jobs_.at(id).spec;
    if (!spec.campaign_id.empty() && stranded_keys.count(key_of(spec.requires_))) ++out.by_campaign[spec.campaign_id];
  }
  return out;
}

void Scheduler::dispatch(int64_t now_ms, std::vector<Action>* out) {
  // Workers that may still take a job. Each step gives the oldest job that fits to the least
  // loaded worker (ties: round robin after the last worker served); a worker that no queued job
  // fits drops out.
  std::vector<WorkerView*> open;
  for (auto& [id, w] : workers_) {
    if (static_cast<int>(w.leased.size()) < w.slots) open.push_back(&w);
  }
  while (!open.empty() && !queue_.empty()) {
    auto after_last = [this](const WorkerView* w) { return w->worker_id > last_dispatched_worker_; };
    auto pick = std::min_element(open.begin(), open.end(), [&](WorkerView* a, WorkerView* b) {
      if (a->leased.size() != b->leased.size()) return a->leased.size() < b->leased.size();
      if (after_last(a) != after_last(b)) return after_last(a);
      return a->worker_id < b->worker_id;
    });
    WorkerView& w = **pick;
    auto job_it = std::find_if(queue_.begin(), queue_.end(), [&](const std::string& id) {
      return !pending_results_.count(id) && matches(jobs_.at(id).spec.requires_, w.caps);
    });
    if (job_it == queue_.end()) {
      open.erase(pick);
      continue;
    }
    JobRecord& job = jobs_.at(*job_it);
    queue_.erase(job_it);
    job.state = JobState::kLeased;
    job.attempt += 1;
    job.worker_id = w.worker_id;
    job.lease_expires_ms = now_ms + options_.lease_ms;
    job.orphaned_wall_ms = 0;
    w.leased.insert(job.spec.job_id);
    w.unlisted[job.spec.job_id] = 0;
    last_dispatched_worker_ = w.worker_id;
    out->push_back(PersistJob{job});
    out->push_back(SendJob{w.worker_id, protocol::Job{job.spec, job.attempt, options_.lease_ms}});
    if (static_cast<int>(w.leased.size()) >= w.slots) open.erase(pick);
  }
}

void Scheduler::release_lease(const JobRecord& job) {
  const std::string& id = job.spec.job_id;
  if (auto w = workers_.find(job.worker_id); w != workers_.end()) {
    w->second.leased.erase(id);
    w->second.unlisted.erase(id);
  }
  if (auto o = orphan_leases_.find(job.worker_id); o != orphan_leases_.end()) {
    o->second.erase(id);
    if (o->second.empty()) orphan_leases_.erase(o);
  }
}

void Scheduler::expire(JobRecord& job, const std::string& reason, int64_t now_ms,
                       std::vector<Action>* out) {
  release_lease(job);
  job.attempt_reasons.push_back(reason);
  job.worker_id.clear();
  job.lease_expires_ms = 0;
  job.orphaned_wall_ms = 0;
  const std::string& id = job.spec.job_id;
  if (pending_results_.count(id)) {
    // Parked until commit_result. No job write: the pending result write carries the final
    // record, and a PersistJob after it in the same batch would overwrite that record.
    job.state = JobState::kQueued;
    queue_.push_back(id);
    return;
  }
  if (cancelled_.contains(job.spec.campaign_id)) {
    end_cancelled(job, out);
    return;
  }
  if (job.attempt < options_.max_attempts) {
    job.state = JobState::kQueued;
    queue_.push_back(id);
    out->push_back(PersistJob{job});
    return;
  }
  job.state = JobState::kLost;
  ResultRecord lost;
  lost.job_id = id;
  lost.attempt = job.attempt;
  lost.status = ResultStatus::kLost;
  lost.stage = "lease";
  lost.reason = "gave up after " + std::to_string(job.attempt) + " attempts";
  lost.attempt_reasons = job.attempt_reasons;
  pending_results_[id] = lost;
  out->push_back(PersistResult{lost, job});
}

void Scheduler::forget_worker(const std::string& worker_id, const std::string& reason,
                              int64_t now_ms, std::vector<Action>* out) {
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return;
  const std::set<std::string> leased = std::move(it->second.leased);
  workers_.erase(it);
  for (const auto& id : leased) expire(jobs_.at(id), reason, now_ms, out);
}

Status Scheduler::check_invariants(int64_t now_ms) const {
  auto broken = [](std::string m) { return Status::internal("scheduler invariant: " + m); };
  for (const auto& [wid, w] : workers_) {
    if (w.worker_id != wid) return broken("worker " + wid + " is filed under another id");
    if (static_cast<int>(w.leased.size()) > w.slots) {
      return broken("worker " + wid + " holds " + std::to_string(w.leased.size()) +
                    " leases but has " + std::to_string(w.slots) + " slots");
    }
    if (w.last_seen_ms > now_ms) return broken("worker " + wid + " was seen in the future");
    if (orphan_leases_.count(wid)) return broken("registered worker " + wid + " has orphan leases");
  }
  auto holds = [&](const std::string& wid, const std::string& job_id) {
    auto w = workers_.find(wid);
    if (w != workers_.end()) return w->second.leased.count(job_id) > 0;
    auto o = orphan_leases_.find(wid);
    return o != orphan_leases_.end() && o->second.count(job_id) > 0;
  };
  auto check_holding = [&](const std::string& wid, const std::set<std::string>& ids) -> Status {
    for (const auto& id : ids) {
      auto j = jobs_.find(id);
      if (j == jobs_.end()) return broken("worker " + wid + " leases unknown job " + id);
      if (j->second.state != JobState::kLeased || j->second.worker_id != wid) {
        return broken("worker " + wid + " lists job " + id + ", which is " +
                      job_state_name(j->second.state) + " on worker '" + j->second.worker_id + "'");
      }
    }
    return {};
  };
  for (const auto& [wid, w] : workers_) {
    if (auto s = check_holding(wid, w.leased); !s.ok()) return s;
  }
  for (const auto& [wid, ids] : orphan_leases_) {
    if (ids.empty()) return broken("empty orphan entry for worker " + wid);
    if (auto s = check_holding(wid, ids); !s.ok()) return s;
  }

  std::map<std::string, int> in_queue;
  for (const auto& id : queue_) {
    if (++in_queue[id] > 1) return broken("job " + id + " is in the queue twice");
    auto j = jobs_.find(id);
    if (j == jobs_.end()) return broken("unknown job " + id + " is in the queue");
    if (j->second.state != JobState::kQueued) {
      return broken("job " + id + " is in the queue but " + job_state_name(j->second.state));
    }
  }
  for (const auto& [id, job] : jobs_) {
    if (job.spec.job_id != id) return broken("job " + id + " is filed under another id");
    switch (job.state) {
      case JobState::kQueued:
        if (!in_queue.count(id)) return broken("queued job " + id + " is not in the queue");
        break;
      case JobState::kLeased:
        if (!holds(job.worker_id, id)) {
          return broken("job " + id + " is leased to '" + job.worker_id +
                        "', which does not list it");
        }
        if (job.lease_expires_ms <= last_tick_ms_) {
          return broken("lease of job " + id + " expired at " +
                        std::to_string(job.lease_expires_ms) + " but survived the tick at " +
                        std::to_string(last_tick_ms_));
        }
        break;
      case JobState::kDone:
      case JobState::kLost:
        if (!job.worker_id.empty()) return broken("finished job " + id + " names a worker");
        break;
    }
    if (job.attempt > options_.max_attempts && job.state != JobState::kDone &&
        job.state != JobState::kLost) {
      return broken("job " + id + " is at attempt " + std::to_string(job.attempt) + " of " +
                    std::to_string(options_.max_attempts));
    }
  }
  for (const auto& [id, r] : pending_results_) {
    auto j = jobs_.find(id);
    if (j == jobs_.end()) return broken("pending result for unknown job " + id);
    const bool lost_row = r.status == ResultStatus::kLost;
    if (lost_row != (j->second.state == JobState::kLost) || j->second.state == JobState::kDone) {
      return broken("pending " + std::string(result_status_name(r.status)) + " row for job " + id +
                    ", which is " + job_state_name(j->second.state));
    }
  }
  return {};
}

SchedulerCounts Scheduler::counts() const {
  SchedulerCounts c;
  for (const auto& [id, job] : jobs_) {
    switch (job.state) {
      case JobState::kQueued: ++c.queued; break;
      case JobState::kLeased: ++c.leased; break;
      case JobState::kDone: ++c.done; break;
      case JobState::kLost: ++c.lost; break;
    }
  }
  c.by_status = by_status_;
  return c;
}

bool Scheduler::all_finished() const {
  if (!pending_results_.empty()) return false;
  return std::all_of(jobs_.begin(), jobs_.end(), [](const auto& kv) {
    return kv.second.state == JobState::kDone || kv.second.state == JobState::kLost;
  });
}

std::vector<Action> Scheduler::cancel(const std::string& campaign_id, const std::string& reason, int64_t now_ms,
                                      CancelCounts* counts) {
  std::vector<Action> out;
  CancelCounts c;
  cancelled_.try_emplace(campaign_id, reason);
  for (auto& [id, job] : jobs_) {
    if (job.spec.campaign_id != campaign_id) continue;
    if (job.state == JobState::kDone || job.state == JobState::kLost || pending_results_.contains(id)) {
      ++c.finished;  // ended, or its row is on its way
    } else if (job.state == JobState::kLeased) {
      ++c.stopping;
      tell_to_stop(job, now_ms, &out);
    } else {
      end_cancelled(job, &out);
      ++c.cancelled;
    }
  }
  if (counts) *counts = c;
  return out;  // no slot is freed: the running jobs keep theirs until they report
}

void Scheduler::tell_to_stop(const JobRecord& job, int64_t now_ms, std::vector<Action>* out) {
  if (job.state != JobState::kLeased || !cancelled_.contains(job.spec.campaign_id) ||
      !workers_.contains(job.worker_id) || pending_results_.contains(job.spec.job_id))
    return;
  auto [it, first] = cancel_sent_ms_.try_emplace(job.spec.job_id, now_ms);
  if (!first) {
    if (now_ms - it->second < options_.lease_ms / 2) return;
    it->second = now_ms;
  }
  out->push_back(SendCancel{job.worker_id, {job.spec.job_id, job.attempt}});
}

void Scheduler::end_cancelled(JobRecord& job, std::vector<Action>* out) {
  // Parked in the queue (dispatch skips a job whose row is pending) until commit_result makes it
  // DONE, as a result of a worker is.
  const std::string& id = job.spec.job_id;
  if (job.state != JobState::kQueued) queue_.push_back(id);  // a queued job is in queue_ already
  job.state = JobState::kQueued;
  job.worker_id.clear();
  job.lease_expires_ms = 0;
  ResultRecord row;
  row.job_id = id;
  row.attempt = job.attempt;
  row.status = ResultStatus::kCancelled;
  row.stage = job.attempt == 0 ? "queue" : "lease";
  const std::string& why = cancelled_[job.spec.campaign_id];
  row.reason = "campaign " + job.spec.campaign_id + " was cancelled" + (why.empty() ? "" : ": " + why);
  row.attempt_reasons = job.attempt_reasons;
  pending_results_[id] = row;
  out->push_back(PersistResult{row, finished_record(job, JobState::kDone)});
}

}  // namespace ak
