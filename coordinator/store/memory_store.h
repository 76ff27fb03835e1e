// MemoryStore: the in-memory twin of RedisStore for unit tests. Same contract as Store; can be
// told to fail (set_available(false)) to test what callers do when Redis is down.
#pragma once

#include <map>

#include "coordinator/store/store.h"

namespace ak {

class MemoryStore final : public Store {
 public:
  Status put_campaign(const CampaignRecord& c) override;
  Status put_jobs(const std::vector<JobRecord>& jobs) override;
  Status put_sources(const std::map<std::string, std::string>& sources) override;
  Status put_result(const ResultRecord& result, const JobRecord& job, bool* inserted) override;
  Result<StoreSnapshot> load() override;
  Result<int64_t> result_count() override;
  Status put_best(const TunedEntry& entry, bool* stored) override;
  Result<std::vector<TunedEntry>> load_best() override;

  void set_available(bool available) { available_ = available; }

 private:
  Status check() const;
  bool available_ = true;
  std::map<std::string, CampaignRecord> campaigns_;
  std::map<std::string, JobRecord> jobs_;
  std::vector<std::string> jobs_order_;
  std::map<std::string, ResultRecord> results_;
  std::vector<std::string> results_order_;
  std::map<std::string, TunedEntry> best_;
  std::map<std::string, std::string> sources_;
};

}  // namespace ak
