#include "coordinator/farm_core.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <type_traits>
#include <variant>

#include "common/hash.h"
#include "common/ids.h"
#include "common/result_fields.h"
#include "coordinator/campaign.h"
#include "coordinator/kernelbench_campaign.h"
#include "coordinator/model_campaign.h"
#include "coordinator/plan.h"
#include "kernels/registry.h"

namespace ak {

using nlohmann::json;
namespace pr = protocol;

namespace {

// The `instance` of a worker message (protocol::Ready::instance); "" for any other message.
std::string instance_of(const pr::Message& m) {
  return std::visit(
      [](const auto& msg) -> std::string {
        if constexpr (requires { msg.instance; } && !std::is_same_v<std::decay_t<decltype(msg)>, pr::Error>)
          return msg.instance;
        else
          return {};
      },
      m);
}

// The fastest a kernel call can be [us]: below it a latency is a fabrication, not a measurement.
// 10 ns is far under a GPU launch (~2 us) and under any CPU call the measurement library can time.
constexpr double kMinImportedLatencyUs = 0.01;
// No memory system moves data faster than this [bytes/s] (HBM3e is ~5e12): a latency below the
// time to touch the entry's bytes at this rate cannot be real.
constexpr double kMaxBytesPerSecond = 1e14;

// An imported entry must be one the farm could have produced: a known kernel type, backend and
// dtype, a shape the type accepts, tunables of the backend's search space with values from it,
// and finite positive figures. Issue 19: an entry with an unknown tunable at 1e-6 us was imported
// and nothing could ever replace it.
// Whether `name` (a C identifier) occurs in `text` as a whole word.
bool uses_identifier(const std::string& text, const std::string& name) {
  if (name.empty()) return false;
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  if (!std::all_of(name.begin(), name.end(), word)) return false;
  for (size_t at = text.find(name); at != std::string::npos; at = text.find(name, at + 1)) {
    const bool starts = at == 0 || !word(text[at - 1]);
    const bool ends = at + name.size() == text.size() || !word(text[at + name.size()]);
    if (starts && ends) return true;
  }
  return false;
}

Status check_imported_entry(const TunedEntry& e) {
  const kernels::KernelSpec* spec = kernels::find(e.kernel_type);
  if (!spec) return Status::invalid("unknown kernel type '" + e.kernel_type.substr(0, 64) + "'");
  const auto source = spec->backends.find(e.backend);
  if (source == spec->backends.end())
    return Status::invalid(e.kernel_type + " has no " + backend_name(e.backend) + " backend");
  if (std::find(spec->dtypes.begin(), spec->dtypes.end(), e.dtype) == spec->dtypes.end())
    return Status::invalid(e.kernel_type + " does not take dtype " + dtype_name(e.dtype));
  if (spec->check_shape) {
    if (std::string why = spec->check_shape(e.shape); !why.empty()) return Status::invalid(why);
  }
  // The starter source's tunables are its search space. A custom candidate (a study with its own
  // space) has tunables of its own: each must at least be a macro its source uses.
  const bool starter = e.source.empty() || e.source == source->second.source;
  for (const auto& [name, value] : e.config) {
    if (!starter) {
      if (!uses_identifier(e.source, name))
        return Status::invalid("tunable '" + name.substr(0, 64) + "' does not occur in the entry's source");
      continue;
    }
    const auto& space = source->second.space;
    const auto t = std::find_if(space.begin(), space.end(), [&](const kernels::Tunable& x) { return x.name == name; });
    if (t == space.end())
      return Status::invalid("unknown tunable '" + name.substr(0, 64) + "' of " + e.kernel_type + "/" +
                             backend_name(e.backend));
    if (std::find(t->values.begin(), t->values.end(), value) == t->values.end())
      return Status::invalid("tunable " + name + "=" + std::to_string(value) + " is outside the search space of " +
                             e.kernel_type + "/" + backend_name(e.backend));
  }
  const double lat = e.m.latency_us;
  if (!std::isfinite(lat) || lat <= 0) return Status::invalid("latency_us must be a finite number > 0");
  double floor_us = kMinImportedLatencyUs;
  if (spec->bytes) floor_us = std::max(floor_us, spec->bytes(e.shape, e.dtype) / kMaxBytesPerSecond * 1e6);
  if (lat < floor_us)
    return Status::invalid("latency_us " + std::to_string(lat) + " is below what any device can do for this shape (" +
                           std::to_string(floor_us) + " us)");
  for (double v : {e.m.baseline_us, e.m.speedup})
    if (!std::isfinite(v) || v < 0) return Status::invalid("baseline_us and speedup must be finite and >= 0");
  return {};
}

}  // namespace

const char* client_role_name(ClientRole r) { return r == ClientRole::kAdmin ? "admin" : "submit"; }

FarmCore::FarmCore(FarmCoreOptions options, Store& store, const Clock& clock)
    : options_(std::move(options)), store_(store), clock_(clock), scheduler_(options_.scheduler) {}

void FarmCore::check_invariants() {
  if (!options_.check_invariants) return;
  Status s = scheduler_.check_invariants(clock_.now_ms());
  if (s.ok()) return;
  spdlog::critical("{}", s.to_string());
  if (broken_invariant_.ok()) broken_invariant_ = s;
#ifndef NDEBUG
  std::abort();
#endif
}

Status FarmCore::start(FarmEffects* out) {
  auto snap = store_.load();
  if (!snap.ok()) return Status::unavailable("cannot rebuild state from the store: " + snap.status().message());
  const int64_t now = clock_.now_ms();
  sources_ = std::move(snap->sources);
  auto restored = scheduler_.restore(*snap, now, clock_.wall_ms());
  for (const auto& c : snap->campaigns) {
    campaigns_[c.campaign_id] = c;
    if (!is_study_document(c.definition)) continue;
    auto sc = parse_study_campaign(c.definition);
    if (!sc.ok()) {
      spdlog::error("study campaign {} in the store no longer parses, not resumed: {}", c.campaign_id,
                    sc.status().message());
      continue;
    }
    studies_[c.campaign_id] = std::move(*sc);
  }
  for (const auto& r : snap->results) {
    results_[r.job_id] = r;
    result_order_.push_back(r.job_id);
  }
  auto best = store_.load_best();
  if (!best.ok()) return Status::unavailable("cannot load the tuning database: " + best.status().message());
  for (auto& e : *best) best_[tuning_key(e)] = std::move(e);
  // Results whose best entry was not written (a crash between the two writes) count now.
  for (const auto& r : snap->results)
    if (auto it = scheduler_.jobs().find(r.job_id); it != scheduler_.jobs().end()) offer_best(it->second, r, out);
  if (!snap->jobs.empty())
    spdlog::info("rebuilt from store: {} campaigns, {} jobs, {} results", snap->campaigns.size(), snap->jobs.size(),
                 snap->results.size());
  started_ms_ = now;
  execute(std::move(restored), out);  // leases found orphaned: when (JobRecord::orphaned_wall_ms)
  // A campaign cancelled before the restart stays cancelled: jobs it left queued end now.
  for (const auto& [id, c] : campaigns_)
    if (c.cancelled) execute(scheduler_.cancel(id, c.cancel_reason, now), out);
  drive_studies(out);
  check_invariants();
  return {};
}

void FarmCore::log_store_error(const std::string& line) {
  auto n = log_throttle_.admit("store", clock_.now_ms());
  if (!n) return;
  if (*n == 0)
    spdlog::error("{}", line);
  else
    spdlog::error("{} ({} more store errors since the last line)", line, *n);
}

void FarmCore::worker_error(const std::string& worker_id, pr::ErrorCode code, const std::string& message,
                            FarmEffects* out) {
  if (auto n = log_throttle_.admit("worker " + worker_id, clock_.now_ms()))
    spdlog::warn("protocol error from '{}': {} {}{}", worker_id.substr(0, 64), pr::error_code_name(code), message,
                 *n ? " (" + std::to_string(*n) + " more from this worker since its last line)" : "");
  out->errors.push_back(code);
  out->to_workers.push_back({worker_id, pr::Error{code, message}});
}

void FarmCore::on_worker(const std::string& identity, const pr::Message& m, FarmEffects* out, const std::string& key) {
  try {
    handle_worker(identity, key, m, out);
  } catch (const std::exception& e) {
    spdlog::error("handler for worker {} failed: {}", identity, e.what());
    worker_error(identity, pr::ErrorCode::kInternal, std::string("coordinator failed on this frame: ") + e.what(), out);
  }
  check_invariants();
}

void FarmCore::handle_worker(const std::string& identity, const std::string& key, const pr::Message& m,
                             FarmEffects* out) {
  const int64_t now = clock_.now_ms();
  // With CURVE, a registered worker id belongs to the key that registered it.
  if (!key.empty() && scheduler_.workers().count(identity)) {
    const auto bound = worker_keys_.find(identity);
    if (bound != worker_keys_.end() && bound->second != key) {
      const std::string why =
          "worker id '" + identity.substr(0, 64) + "' is registered under another key; each worker needs its own id";
      out->errors.push_back(pr::ErrorCode::kForbidden);
      out->to_workers.push_back({identity, pr::Error{pr::ErrorCode::kForbidden, why}});
      out->refusals.push_back({key, "key_mismatch", why});
      return;
    }
  }
  // One worker per registered id (issue 21): a message of another instance under an id that a
  // live worker holds comes from a second worker given the same id. It is refused, so that the two
  // do not merge (its READY would release the holder's leases, its heartbeats would drop them).
  const std::string instance = instance_of(m);
  if (!instance.empty() && scheduler_.workers().count(identity)) {
    const auto held = worker_instances_.find(identity);
    if (held != worker_instances_.end() && !held->second.empty() && held->second != instance) {
      const std::string why =
          "worker id '" + identity.substr(0, 64) + "' is held by a live worker (instance " +
          held->second.substr(0, 64) + "); this worker is instance " + instance.substr(0, 64) +
          ", another installation (another --state-dir or host). Give each worker its own --id; an id is free " +
          "again once its worker disconnects or has been silent for " +
          std::to_string(options_.scheduler.worker_timeout_ms) + " ms";
      out->errors.push_back(pr::ErrorCode::kWorkerIdInUse);
      out->to_workers.push_back({identity, pr::Error{pr::ErrorCode::kWorkerIdInUse, why, instance}});
      out->refusals.push_back({identity, "worker_id_in_use", why});
      return;
    }
  }
  auto check_identity = [&](const std::string& worker_id) {
    if (worker_id == identity) return true;
    worker_error(identity, pr::ErrorCode::kIdentityMismatch,
                 "body names worker '" + worker_id.substr(0, 64) + "' but the connection is '" +
                     identity.substr(0, 64) + "'; set the DEALER routing id to the worker id",
                 out);
    return false;
  };
  const bool heartbeat = std::holds_alternative<pr::Heartbeat>(m);
  if (!heartbeat) ++version_;
  if (auto* r = std::get_if<pr::Ready>(&m)) {
    if (!check_identity(r->worker_id)) return;
    if (!key.empty()) worker_keys_[r->worker_id] = key;
    worker_instances_[r->worker_id] = r->instance;
    spdlog::info("worker {} ready: {} {} slots={}", r->worker_id, r->caps.gpu_name, r->caps.arch, r->slots);
    worker_caps_[r->worker_id] = r->caps;
    execute(scheduler_.on_ready(*r, now), out);
  } else if (auto* h = std::get_if<pr::Heartbeat>(&m)) {
    if (!check_identity(h->worker_id)) return;
    execute(scheduler_.on_heartbeat(*h, now), out);
  } else if (auto* res = std::get_if<pr::ResultMsg>(&m)) {
    if (!check_identity(res->worker_id)) return;
    ResultRefusal refusal = ResultRefusal::kNone;
    execute(scheduler_.on_result(*res, now, &refusal), out);
    if (refusal != ResultRefusal::kNone)
      out->refusals.push_back({identity, refusal == ResultRefusal::kNotLeased ? "not_leased" : "stale_attempt",
                               "result for job " + res->result.job_id.substr(0, 64) + " attempt " +
                                   std::to_string(res->result.attempt) +
                                   " not stored: its lease is not this worker's"});
  } else if (auto* dc = std::get_if<pr::Disconnect>(&m)) {
    if (!check_identity(dc->worker_id)) return;
    spdlog::info("worker {} disconnected: {}", dc->worker_id, dc->reason);
    execute(scheduler_.on_disconnect(*dc, now), out);
  } else {
    worker_error(identity, pr::ErrorCode::kUnknownType,
                 std::string("message type ") + pr::type_name(m) + " is not accepted from workers", out);
  }
  if (!heartbeat) drive_studies(out);
}

void FarmCore::on_tick(FarmEffects* out) {
  execute(scheduler_.on_tick(clock_.now_ms()), out);
  drive_studies(out);
  check_invariants();
}

Status FarmCore::add_sources(std::map<std::string, std::string> sources, FarmEffects* out) {
  for (auto it = sources.begin(); it != sources.end();) {
    auto known = sources_.find(it->first);
    if (known == sources_.end()) {
      ++it;
      continue;
    }
    // xxh64 is no cryptographic hash: a text crafted to collide with a stored one must not make
    // its jobs run the stored text (or another campaign's jobs run it).
    if (known->second != it->second)
      return Status::invalid("the candidate source has the xxh64 " + it->first +
                             " of another stored source but a different text; change it (a comment will do)");
    it = sources.erase(it);
  }
  if (sources.empty()) return {};
  if (Status s = store_.put_sources(sources); !s.ok()) {
    ++out->store_errors;
    return s;
  }
  sources_.merge(sources);
  return {};
}

Status FarmCore::intern_sources(std::vector<JobSpec>* jobs, FarmEffects* out) {
  std::map<std::string, std::string> fresh;
  for (JobSpec& j : *jobs) {
    if (j.source.empty() || !j.source_hash.empty()) continue;
    j.source_hash = xxh64_hex(j.source);
    if (auto known = sources_.find(j.source_hash); known == sources_.end())
      fresh.emplace(j.source_hash, j.source);
    else if (known->second != j.source)
      return Status::invalid("a proposal's source collides by xxh64 with another stored source");
    j.source.clear();
    j.source.shrink_to_fit();
  }
  return add_sources(std::move(fresh), out);
}

JobSpec FarmCore::with_source(const JobSpec& spec) const {
  JobSpec s = spec;
  if (s.source_hash.empty()) return s;
  if (auto it = sources_.find(s.source_hash); it != sources_.end()) {
    s.source = it->second;
    s.source_hash.clear();
  } else {
    spdlog::error("job {} names source {}, which is not in the source table; it is sent without its source", s.job_id,
                  s.source_hash);
  }
  return s;
}

PlanLimits FarmCore::plan_limits() const {
  PlanLimits l;
  l.max_jobs = options_.max_jobs_per_submit;
  // Per backend the largest memory announced; a worker that announced none makes it unknown.
  std::map<Backend, bool> unknown;
  for (const auto& [id, w] : scheduler_.workers())
    for (Backend b : w.caps.backends) {
      if (w.caps.memory_bytes <= 0) unknown[b] = true;
      l.device_memory_bytes[b] = std::max(l.device_memory_bytes[b], w.caps.memory_bytes);
    }
  for (const auto& [b, u] : unknown)
    if (u) l.device_memory_bytes.erase(b);
  return l;
}

StudyProgress FarmCore::progress_of(const std::string& campaign_id) const {
  std::vector<const JobRecord*> jobs;
  const std::string prefix = campaign_id + "-s";
  for (auto it = scheduler_.jobs().lower_bound(prefix); it != scheduler_.jobs().end(); ++it) {
    if (it->first.compare(0, prefix.size(), prefix) != 0) break;
    jobs.push_back(&it->second);
  }
  const auto& c = studies_.at(campaign_id);
  const auto rec = campaigns_.find(campaign_id);
  SharedMemoryLimits smem;
  for (const auto& [id, w] : scheduler_.workers()) add_shared_memory_limit(w.caps, &smem);
  return study_progress(c, campaign_id, rec == campaigns_.end() ? 0 : rec->second.submitted_wall_ms, jobs, results_,
                        clock_.wall_ms(), smem);
}

void FarmCore::drive_studies(FarmEffects* out) {
  if (studies_.empty()) return;
  // Slots per GPU model, less what study jobs already hold or wait for.
  std::map<std::string, int64_t> free;
  SharedMemoryLimits smem;  // what the workers announced; a model without it is guessed by name
  for (const auto& [id, w] : scheduler_.workers()) {
    free[gpu_model_key(w.caps.gpu_name)] += w.slots;
    add_shared_memory_limit(w.caps, &smem);
  }
  if (free.empty()) return;
  std::vector<std::pair<const std::string*, StudyProgress>> progress;
  for (const auto& [cid, c] : studies_) {
    if (studies_complete_.count(cid)) continue;
    StudyProgress p = progress_of(cid);
    if (p.complete) {
      studies_complete_.insert(cid);
      continue;
    }
    for (const auto& s : p.studies)
      if (auto it = free.find(gpu_model_key(s.gpu_model)); it != free.end()) it->second -= int64_t(s.in_flight);
    // A cancelled study's running trials still hold their slots; it proposes nothing more.
    if (!campaigns_[cid].cancelled) progress.emplace_back(&cid, std::move(p));
  }
  // Campaigns in the order they were submitted take what is free.
  std::sort(progress.begin(), progress.end(), [&](const auto& a, const auto& b) {
    return campaigns_[*a.first].submitted_wall_ms < campaigns_[*b.first].submitted_wall_ms;
  });
  for (auto& [cid, p] : progress) {
    const int64_t room = options_.max_jobs_per_campaign - campaigns_[*cid].job_count;
    if (room <= 0) {
      if (capped_.insert(*cid).second)
        spdlog::warn(
            "study campaign {} reached the cap of {} jobs per campaign (--max-jobs-per-campaign); it "
            "proposes no more",
            *cid, options_.max_jobs_per_campaign);
      continue;
    }
    std::vector<JobSpec> jobs = propose_study_jobs(studies_.at(*cid), *cid, p, &free, smem);
    if (int64_t(jobs.size()) > room) jobs.resize(size_t(room));
    if (jobs.empty()) continue;
    if (Status s = intern_sources(&jobs, out); !s.ok()) {
      log_store_error("study campaign " + *cid + ": proposals not submitted, their source not stored: " + s.message());
      continue;
    }
    const size_t n = jobs.size();
    auto actions = scheduler_.submit(std::move(jobs), clock_.now_ms());
    if (!actions.ok()) {
      spdlog::error("study campaign {}: proposals not submitted: {}", *cid, actions.status().message());
      continue;
    }
    campaigns_[*cid].job_count += int64_t(n);
    execute(std::move(*actions), out);
  }
}

Status FarmCore::store_best(const TunedEntry& entry, bool* stored, FarmEffects* out) {
  Status s = store_.put_best(entry, stored);
  if (!s.ok()) {
    ++out->store_errors;
    return s;
  }
  if (*stored) best_[tuning_key(entry)] = entry;
  return {};
}

void FarmCore::offer_best(const JobRecord& job, const ResultRecord& result, FarmEffects* out) {
  // Called for every stored row at start: most are no better than their key's entry, and are
  // turned away before an entry (with its source) is made.
  if (result.status != ResultStatus::kPass) return;
  if (const auto it = best_.find(tuning_key(job.spec, result.gpu));
      it != best_.end() && !(result.m.latency_us < it->second.m.latency_us))
    return;
  const auto caps = worker_caps_.find(result.worker_id);
  JobRecord sourced = job;  // the entry keeps the full source
  sourced.spec = with_source(job.spec);
  auto entry = tuned_entry_from(sourced, result, caps == worker_caps_.end() ? nullptr : &caps->second);
  if (!entry) return;
  bool stored = false;
  if (Status s = store_best(*entry, &stored, out); !s.ok())
    log_store_error("tuning database: best entry of " + result.job_id +
                    " not stored (it is offered again at the next start): " + s.to_string());
}

json FarmCore::import_best(const json& document, const ClientPeer& peer, pr::Error* error, FarmEffects* out) {
  if (!peer.key.empty() && peer.role != ClientRole::kAdmin) {
    *error = {pr::ErrorCode::kForbidden,
              "importing tuning entries needs the admin role in the coordinator's client allow-list"};
    out->refusals.push_back({peer.key, "not_admin", "IMPORT_BEST"});
    return {};
  }
  auto entries = parse_tuning_export(document);
  if (!entries.ok()) {
    *error = {pr::ErrorCode::kBadRequest, entries.status().message()};
    return {};
  }
  // Every entry is checked before any is stored: a document is taken whole or not at all.
  for (size_t i = 0; i < entries->size(); ++i) {
    if (Status s = check_imported_entry((*entries)[i]); !s.ok()) {
      *error = {pr::ErrorCode::kBadRequest,
                "tuning database: entry " + std::to_string(i) + ": " + s.message() + "; nothing was imported"};
      return {};
    }
  }
  int64_t stored_n = 0;
  for (const auto& e : *entries) {
    bool stored = false;
    if (Status s = store_best(e, &stored, out); !s.ok()) {
      *error = {pr::ErrorCode::kStoreUnavailable, "tuning database: stopped after " + std::to_string(stored_n) +
                                                      " stored entries: " + s.message() + "; import the file again"};
      return {};
    }
    stored_n += stored ? 1 : 0;
  }
  ++version_;
  spdlog::info("tuning database: imported {} entries, {} stored", entries->size(), stored_n);
  return pr::ImportBestReply{int64_t(entries->size()), stored_n, int64_t(entries->size()) - stored_n};
}

void FarmCore::execute(std::vector<Action> actions, FarmEffects* out) {
  if (!actions.empty()) ++version_;
  std::vector<JobRecord> batch;
  // Deliveries whose lease was not stored are not sent (Scheduler's result rules): the worker's
  // heartbeats never list the job, which releases the lease.
  std::set<std::pair<std::string, int>> unstored_leases;
  auto flush = [&]() {
    if (batch.empty()) return;
    Status s = store_.put_jobs(batch);
    if (!s.ok()) {
      ++out->store_errors;
      log_store_error("store: " + s.to_string());
      for (const auto& j : batch)
        if (j.state == JobState::kLeased) unstored_leases.insert({j.spec.job_id, j.attempt});
    }
    batch.clear();
  };
  std::set<std::string> unstored;  // results whose store write failed: no ACK for them
  for (size_t i = 0; i < actions.size(); ++i) {
    Action& a = actions[i];
    if (auto* pj = std::get_if<PersistJob>(&a)) {
      if (pj->job.state == JobState::kQueued && pj->job.attempt > 0) ++out->requeued;
      batch.push_back(std::move(pj->job));
      continue;
    }
    flush();
    if (auto* sj = std::get_if<SendJob>(&a)) {
      if (unstored_leases.count({sj->job.spec.job_id, sj->job.attempt})) continue;
      ++out->dispatched;
      first_dispatch_ms_.emplace(sj->job.spec.job_id, clock_.now_ms());
      // The job on the wire carries its source (the worker never sees the table).
      if (!sj->job.spec.source_hash.empty()) sj->job.spec = with_source(sj->job.spec);
      out->to_workers.push_back({sj->worker_id, std::move(sj->job)});
    } else if (auto* pr_ = std::get_if<PersistResult>(&a)) {
      bool inserted = false;
      Status s = store_.put_result(pr_->result, pr_->job, &inserted);
      if (!s.ok()) {
        ++out->store_errors;
        log_store_error("result of " + pr_->result.job_id + " not stored, not acknowledging: " + s.to_string());
        unstored.insert(pr_->result.job_id);
        continue;
      }
      const std::string job_id = pr_->result.job_id;
      if (inserted) {
        results_[job_id] = pr_->result;
        result_order_.push_back(job_id);
        const bool cancelled = pr_->result.status == ResultStatus::kCancelled;
        if (!cancelled) ++results_since_start_;  // a cancelled job is no experiment
        double dur = -1;
        if (auto it = first_dispatch_ms_.find(job_id); it != first_dispatch_ms_.end()) {
          dur = (clock_.now_ms() - it->second) / 1000.0;
          first_dispatch_ms_.erase(it);
        }
        out->completed.push_back({pr_->result.status, cancelled ? -1 : dur});  // its duration is no job's
        offer_best(pr_->job, pr_->result, out);
      } else {
        ++out->duplicate_results;
      }
      auto more = scheduler_.commit_result(job_id, clock_.now_ms());
      actions.insert(actions.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
    } else if (auto* sa = std::get_if<SendAck>(&a)) {
      if (unstored.count(sa->ack.job_id)) continue;
      out->to_workers.push_back({sa->worker_id, sa->ack});
    } else if (auto* sc = std::get_if<SendCancel>(&a)) {
      out->to_workers.push_back({sc->worker_id, sc->cancel});
    } else if (auto* se = std::get_if<SendError>(&a)) {
      out->errors.push_back(se->error.code);
      out->to_workers.push_back({se->worker_id, se->error});
    }
  }
  flush();
}

void FarmCore::on_client(const std::string& identity, const pr::Message& m, FarmEffects* out, const ClientPeer& peer) {
  pr::Error error;
  json body;
  // A long poll waits for a version after the one it has seen.
  if (auto* q = std::get_if<pr::StatusQuery>(&m); q && q->after_version >= version_) {
    waiters_.push_back({identity, q->after_version, clock_.now_ms() + std::clamp<int64_t>(q->wait_ms, 0, 60'000)});
    return;
  }
  try {
    body = handle_client(m, peer, &error, out);
  } catch (const std::exception& e) {
    error = {pr::ErrorCode::kInternal, e.what()};
  }
  if (error.code != pr::ErrorCode::kUnknown || !error.message.empty()) {
    out->errors.push_back(error.code);
    out->to_clients.push_back({identity, error});
  } else {
    out->to_clients.push_back({identity, pr::Reply{std::move(body)}});
  }
  check_invariants();
}

void FarmCore::answer_waiters(FarmEffects* out) {
  if (waiters_.empty()) return;
  const int64_t now_ms = clock_.now_ms();
  std::optional<pr::Message> reply;  // one status document serves every waiter answered now
  std::vector<Waiter> still;
  for (auto& w : waiters_) {
    if (version_ <= w.after_version && now_ms < w.deadline_ms) {
      still.push_back(std::move(w));
      continue;
    }
    if (!reply) reply = pr::Reply{status()};
    out->to_clients.push_back({w.identity, *reply});
  }
  waiters_ = std::move(still);
}

json FarmCore::handle_client(const pr::Message& m, const ClientPeer& peer, pr::Error* error, FarmEffects* out) {
  if (auto* s = std::get_if<pr::Submit>(&m); s && is_study_document(s->campaign)) {
    const std::string id = new_campaign_id();
    auto sc = parse_study_campaign(s->campaign);
    if (!sc.ok()) {
      *error = {pr::ErrorCode::kBadRequest, sc.status().message()};
      return {};
    }
    if (int64_t(sc->studies.size()) > options_.max_jobs_per_submit) {
      *error = {pr::ErrorCode::kBadRequest, "study campaign has " + std::to_string(sc->studies.size()) +
                                                " studies; this coordinator accepts at most " +
                                                std::to_string(options_.max_jobs_per_submit) +
                                                " per campaign (--max-jobs-per-submit); split it"};
      return {};
    }
    CampaignRecord rec = study_record(*sc, s->campaign, id, clock_.wall_ms());
    rec.owner = peer.key;
    Status st = store_.put_campaign(rec);
    if (!st.ok()) {
      ++out->store_errors;
      *error = {pr::ErrorCode::kStoreUnavailable, "campaign not stored: " + st.message()};
      return {};
    }
    campaigns_[id] = rec;
    const size_t n = sc->studies.size();
    studies_[id] = std::move(*sc);
    drive_studies(out);
    spdlog::info("study campaign {} '{}' submitted: {} studies", id, rec.name, n);
    return pr::SubmitReply{id, campaigns_[id].job_count, rec.name, int64_t(n)};
  }
  if (auto* s = std::get_if<pr::Submit>(&m)) {
    const std::string id = new_campaign_id();
    const PlanLimits limits = plan_limits();
    auto plan = plan_job_campaign(s->campaign, id, clock_.wall_ms(), limits);
    if (!plan.ok()) {
      *error = {pr::ErrorCode::kBadRequest, plan.status().message()};
      return {};
    }
    plan->record.owner = peer.key;
    // Sources before the campaign and its jobs, which name them.
    if (Status st = add_sources(std::move(plan->sources), out); !st.ok()) {
      *error = st.code() == StatusCode::kInvalidArgument
                   ? pr::Error{pr::ErrorCode::kBadRequest, st.message()}
                   : pr::Error{pr::ErrorCode::kStoreUnavailable, "campaign not stored: " + st.message()};
      return {};
    }
    Status st = store_.put_campaign(plan->record);
    if (!st.ok()) {
      ++out->store_errors;
      *error = {pr::ErrorCode::kStoreUnavailable, "campaign not stored: " + st.message()};
      return {};
    }
    const int64_t n = plan->record.job_count;
    auto actions = scheduler_.submit(std::move(plan->jobs), clock_.now_ms());
    if (!actions.ok()) {
      *error = {pr::ErrorCode::kBadRequest, actions.status().message()};
      return {};
    }
    campaigns_[id] = plan->record;
    execute(std::move(*actions), out);
    spdlog::info("campaign {} '{}' submitted: {} jobs", id, plan->record.name, n);
    return pr::SubmitReply{id, n, plan->record.name, std::nullopt};
  }
  if (std::get_if<pr::StatusQuery>(&m)) return status();
  if (auto* q = std::get_if<pr::ResultsQuery>(&m)) return results(*q);
  if (auto* q = std::get_if<pr::BestQuery>(&m)) return best(q->query);
  if (auto* q = std::get_if<pr::ImportBest>(&m)) return import_best(q->document, peer, error, out);
  if (auto* q = std::get_if<pr::Cancel>(&m)) return cancel_campaign(*q, peer, error, out);
  *error = {pr::ErrorCode::kUnknownType, std::string("message type ") + pr::type_name(m) + " is not a client request"};
  return {};
}

json FarmCore::cancel_campaign(const pr::Cancel& q, const ClientPeer& peer, pr::Error* error, FarmEffects* out) {
  auto it = campaigns_.find(q.campaign_id);
  if (it == campaigns_.end()) {
    *error = {pr::ErrorCode::kBadRequest,
              "no campaign '" + q.campaign_id + "' in this farm (autokernel status lists them)"};
    return {};
  }
  if (!peer.key.empty() && peer.role != ClientRole::kAdmin && it->second.owner != peer.key) {
    *error = {pr::ErrorCode::kForbidden, "campaign " + q.campaign_id +
                                             " was submitted by another client; only its owner or a client with "
                                             "the admin role may cancel it"};
    out->refusals.push_back({peer.key, "not_owner", "cancel of campaign " + q.campaign_id.substr(0, 64)});
    return {};
  }
  if (!it->second.cancelled) {
    CampaignRecord rec = it->second;
    rec.cancelled = true;
    rec.cancel_reason = q.reason;
    // Stored first: a restart must not bring back what the reply says is cancelled.
    if (Status st = store_.put_campaign(rec); !st.ok()) {
      ++out->store_errors;
      *error = {pr::ErrorCode::kStoreUnavailable, "cancellation not stored: " + st.message()};
      return {};
    }
    it->second = rec;
  }
  Scheduler::CancelCounts c;
  execute(scheduler_.cancel(q.campaign_id, it->second.cancel_reason, clock_.now_ms(), &c), out);
  ++version_;
  spdlog::info("campaign {} cancelled: {} jobs ended, {} running told to stop, {} finished before", q.campaign_id,
               c.cancelled, c.stopping, c.finished);
  return pr::CancelReply{q.campaign_id, c.cancelled, c.stopping, c.finished};
}

pr::BestReply FarmCore::best(const TuningQuery& q) const {
  std::vector<TunedEntry> match;
  for (const auto& [key, e] : best_)  // best_ is ordered by tuning_key, as the export document is
    if (q.matches(e)) match.push_back(e);
  const int64_t now = clock_.wall_ms();
  return pr::BestReply{1, now, iso_utc(now), std::move(match)};
}

pr::StatusReply FarmCore::status() const {
  const int64_t now = clock_.now_ms();
  auto c = scheduler_.counts();
  pr::StatusReply st;
  st.jobs = {c.queued, c.leased, c.done, c.lost};
  for (const auto& [s, n] : c.by_status) st.results[result_status_name(s)] = n;
  for (const auto& [id, w] : scheduler_.workers()) {
    pr::WorkerRow row{id,
                      w.caps.gpu_name,
                      w.caps.arch,
                      w.caps.pci_id,
                      {},
                      w.slots,
                      std::vector<std::string>(w.leased.begin(), w.leased.end()),
                      now - w.last_seen_ms,
                      w.caps.ceilings};
    for (auto x : w.caps.backends) row.backends.push_back(backend_name(x));
    st.workers.push_back(std::move(row));
  }
  struct Agg {
    int64_t total = 0, finished = 0, pass = 0, failed = 0, cancelled = 0;
    const ResultRecord* best = nullptr;
    const JobRecord* best_job = nullptr;
  };
  std::map<std::string, Agg> agg;
  for (const auto& [id, job] : scheduler_.jobs()) {
    Agg& a = agg[job.spec.campaign_id];
    ++a.total;
    if (job.state == JobState::kDone || job.state == JobState::kLost) ++a.finished;
    auto it = results_.find(id);
    if (it == results_.end()) continue;
    if (it->second.status == ResultStatus::kPass) {
      ++a.pass;
      if (!a.best || it->second.m.speedup > a.best->m.speedup) {
        a.best = &it->second;
        a.best_job = &job;
      }
    } else if (it->second.status == ResultStatus::kCancelled) {
      ++a.cancelled;  // measured nothing: neither a pass nor a failure
    } else {
      ++a.failed;
    }
  }
  const Scheduler::Stranded stranded = scheduler_.stranded();
  for (const auto& [id, rec] : campaigns_) {
    const Agg& a = agg[id];
    pr::CampaignRow row;
    row.campaign_id = id;
    if (auto u = stranded.by_campaign.find(id); u != stranded.by_campaign.end()) row.unrunnable = u->second;
    row.name = rec.name;
    row.total = a.total;
    row.finished = a.finished;
    row.pass = a.pass;
    row.failed = a.failed;
    if (a.best)
      row.best = pr::CampaignBest{a.best->job_id,
                                  a.best->m.latency_us,
                                  a.best->m.speedup,
                                  shape_string(a.best_job->spec.shape),
                                  dtype_name(a.best_job->spec.dtype),
                                  config_string(a.best_job->spec.config)};
    row.submitted_wall_ms = rec.submitted_wall_ms;
    row.complete = a.finished >= a.total;
    if (studies_.count(id)) {
      StudyProgress p = progress_of(id);
      row.is_study = true;
      row.complete = p.complete;
      row.amdahl = p.amdahl;
      for (const auto& sd : p.studies) row.studies.push_back(study_status_row(sd));
    }
    if (rec.cancelled) {  // complete once its running jobs have ended too
      row.cancelled = true;
      row.cancelled_jobs = a.cancelled;
      row.cancel_reason = rec.cancel_reason;
      row.complete = a.finished >= a.total;
    }
    st.campaigns.push_back(std::move(row));
  }
  const double up_s = std::max<double>(1e-3, (now - started_ms_) / 1000.0);
  st.uptime_s = up_s;
  st.version = version_;
  st.results_per_hour = results_since_start_ / up_s * 3600.0;
  st.unrunnable = stranded.by_need;
  return st;
}

pr::ResultsReply FarmCore::results(const pr::ResultsQuery& q) const {
  pr::ResultsReply reply;
  int64_t experiment = 0;
  const auto& jobs = scheduler_.jobs();
  for (const auto& id : result_order_) {
    ++experiment;
    const ResultRecord& r = results_.at(id);
    auto jt = jobs.find(id);
    if (jt == jobs.end()) continue;
    if (!q.campaign_id.empty() && jt->second.spec.campaign_id != q.campaign_id) continue;
    if (!q.status.empty() && q.status != result_status_name(r.status)) continue;
    if (!q.kernel_type.empty() && jt->second.spec.kernel_type != q.kernel_type) continue;
    if (!q.shape.empty() && shape_string(jt->second.spec.shape) != q.shape) continue;
    if (!q.gpu_model.empty() && gpu_model_key(r.gpu) != gpu_model_key(q.gpu_model)) continue;
    reply.rows.push_back(result_row(jt->second, r, experiment).get<pr::ResultRow>());
  }
  return reply;
}

}  // namespace ak
