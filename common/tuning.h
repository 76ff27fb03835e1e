// The tuning database: the best verified configuration and source of each (kernel type, backend,
// GPU model, dtype, shape), with its measurement and provenance. The coordinator keeps it in the
// store (Store::put_best; Redis hash <prefix>best, coordinator/store/STORE.md), offers it to clients (BEST,
// IMPORT_BEST in common/PROTOCOL.md; `autokernel best`), and exports it as a file that
// kernels/tuned.h loads.
//
// Export file (format 1; JSON), a superset of what kernels/tuned.h reads:
//   {"format": 1, "exported_wall_ms": ..., "entries": [<TunedEntry JSON>, ...]}
// entries sorted by key. Importing a file into another farm keeps, per key, the faster entry.
//
// Pure values and functions; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/job.h"
#include "common/status.h"

namespace ak {

struct TunedEntry {
  // What was tuned.
  std::string kernel_type;
  Backend backend = Backend::kCpu;
  std::string gpu_model;  // the worker's GPU name ("NVIDIA H200"), "cpu" for CPU workers
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  // The winner.
  std::map<std::string, int64_t> config;
  std::string source;        // the candidate's full source text
  std::string source_hash;   // xxh64, hex (ResultRecord::source_hash)
  std::string options_hash;
  Measurement m;             // latency_us, baseline_us and speedup among the rest
  // Provenance.
  std::string job_id;
  std::string campaign_id;
  std::string worker_id;
  std::string arch;                              // "sm_90a", "x86_64"; "" when unknown
  std::map<std::string, std::string> versions;   // Capabilities::versions of the worker
  int64_t completed_wall_ms = 0;
  std::string date;                              // completed_wall_ms as "2026-12-04T02:10:00Z"
};

void to_json(nlohmann::json& j, const TunedEntry& v);
void from_json(const nlohmann::json& j, TunedEntry& v);

// "softmax|cuda|nvidia h200|bf16|4096x4096": the GPU model in lower case, as workers' names and
// campaigns' gpu_models compare case-insensitively.
std::string tuning_key(const TunedEntry& e);

// The key of the entry a result of `job` on a worker with GPU `gpu_model` would make, without
// making it (the entry copies the source).
std::string tuning_key(const JobSpec& job, const std::string& gpu_model);

// Whether `candidate` should replace `incumbent` under the same key: strictly lower latency.
// Ties keep the incumbent, so re-importing a file changes nothing.
bool replaces(const TunedEntry& candidate, const TunedEntry& incumbent);

// The entry a result makes, or nullopt when it is not a tuning result: only PASS rows with a
// latency, of a job with a kernel type (not KernelBench jobs: their problems are not kernel types). `caps` is the worker's last READY (nullptr: unknown, the
// provenance then lacks arch and versions).
std::optional<TunedEntry> tuned_entry_from(const JobRecord& job, const ResultRecord& result,
                                           const Capabilities* caps);

// Which entries a query asks for; empty fields match everything. gpu_model compares
// case-insensitively, shape is "4096x4096".
struct TuningQuery {
  std::string kernel_type;
  std::string backend;
  std::string gpu_model;
  std::string dtype;
  std::string shape;
  bool matches(const TunedEntry& e) const;
};

// The export document of `entries` (sorted by key here).
nlohmann::json tuning_export(std::vector<TunedEntry> entries, int64_t exported_wall_ms);
// Parses an export document; errors (kInvalidArgument) name the entry and key at fault.
Result<std::vector<TunedEntry>> parse_tuning_export(const nlohmann::json& doc);

// "2026-12-04T02:10:00Z" (UTC) for milliseconds since the epoch.
std::string iso_utc(int64_t wall_ms);

}  // namespace ak
