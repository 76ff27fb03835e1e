// Store: the durable record of campaigns, jobs and results. The Redis key schema is documented
// in coordinator/store/STORE.md.
//
// The coordinator is the only user. Implementations: RedisStore (coordinator/store/redis_store.h) and
// MemoryStore (coordinator/store/memory_store.h), the in-memory twin used by unit tests. Neither is
// thread-safe: one coordinator thread owns the store. Every method returns a non-ok Status with
// code kUnavailable when the backend cannot be reached; nothing is partially written by a
// failed put_result (it is one transaction).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/job.h"
#include "common/status.h"
#include "common/tuning.h"

namespace ak {

struct StoreSnapshot {
  std::vector<CampaignRecord> campaigns;
  std::vector<JobRecord> jobs;
  std::vector<ResultRecord> results;  // in the order they were first stored
  // The source table: xxh64_hex(text) -> text, for jobs whose JobSpec::source_hash is set.
  std::map<std::string, std::string> sources;
};

class Store {
 public:
  virtual ~Store() = default;
  virtual Status put_campaign(const CampaignRecord& c) = 0;
  // Writes (or overwrites) job records; a batch is written in one round trip.
  virtual Status put_jobs(const std::vector<JobRecord>& jobs) = 0;
  // Adds candidate sources to the source table, keyed by xxh64_hex of their text; a key there
  // already keeps its text (the same text, by the hash). Written before the jobs that name them.
  virtual Status put_sources(const std::map<std::string, std::string>& sources) = 0;
  // Atomically: stores `result` as the one result row of result.job_id unless a row exists
  // already (then the stored row is kept), and writes `job`. `*inserted` tells which happened.
  virtual Status put_result(const ResultRecord& result, const JobRecord& job, bool* inserted) = 0;
  // Everything, for rebuilding coordinator state after a restart.
  virtual Result<StoreSnapshot> load() = 0;
  virtual Result<int64_t> result_count() = 0;
  // The tuning database (common/tuning.h). Atomically: stores `entry` under tuning_key(entry)
  // when no entry is there or replaces(entry, stored) holds; `*stored` tells which happened.
  virtual Status put_best(const TunedEntry& entry, bool* stored) = 0;
  // Every entry, sorted by key.
  virtual Result<std::vector<TunedEntry>> load_best() = 0;
};

}  // namespace ak
