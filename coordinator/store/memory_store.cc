#include "coordinator/store/memory_store.h"

namespace ak {

Status MemoryStore::check() const {
  return available_ ? Status() : Status::unavailable("memory store set unavailable by the test");
}

Status MemoryStore::put_campaign(const CampaignRecord& c) {
  if (auto s = check(); !s.ok()) return s;
  campaigns_[c.campaign_id] = c;
  return {};
}

Status MemoryStore::put_jobs(const std::vector<JobRecord>& jobs) {
  if (auto s = check(); !s.ok()) return s;
  for (const auto& j : jobs) {
    if (!jobs_.count(j.spec.job_id)) jobs_order_.push_back(j.spec.job_id);
    jobs_[j.spec.job_id] = j;
  }
  return {};
}

Status MemoryStore::put_sources(const std::map<std::string, std::string>& sources) {
  if (auto s = check(); !s.ok()) return s;
  sources_.insert(sources.begin(), sources.end());
  return {};
}

Status MemoryStore::put_result(const ResultRecord& result, const JobRecord& job, bool* inserted) {
  if (auto s = check(); !s.ok()) return s;
  *inserted = !results_.count(result.job_id);
  if (*inserted) {
    results_[result.job_id] = result;
    results_order_.push_back(result.job_id);
  }
  if (!jobs_.count(job.spec.job_id)) jobs_order_.push_back(job.spec.job_id);
  jobs_[job.spec.job_id] = job;
  return {};
}

Result<StoreSnapshot> MemoryStore::load() {
  if (auto s = check(); !s.ok()) return s;
  StoreSnapshot snap;
  for (const auto& [id, c] : campaigns_) snap.campaigns.push_back(c);
  for (const auto& id : jobs_order_) snap.jobs.push_back(jobs_.at(id));
  for (const auto& id : results_order_) snap.results.push_back(results_.at(id));
  snap.sources = sources_;
  return snap;
}

Result<int64_t> MemoryStore::result_count() {
  if (auto s = check(); !s.ok()) return s;
  return static_cast<int64_t>(results_.size());
}

Status MemoryStore::put_best(const TunedEntry& entry, bool* stored) {
  if (auto s = check(); !s.ok()) return s;
  const std::string key = tuning_key(entry);
  auto it = best_.find(key);
  *stored = it == best_.end() || replaces(entry, it->second);
  if (*stored) best_[key] = entry;
  return {};
}

Result<std::vector<TunedEntry>> MemoryStore::load_best() {
  if (auto s = check(); !s.ok()) return s;
  std::vector<TunedEntry> out;
  for (const auto& [key, e] : best_) out.push_back(e);
  return out;
}

}  // namespace ak
