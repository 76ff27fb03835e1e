// Study campaigns: the research loop. A study campaign (document "kind": "study", documented in
// coordinator/CAMPAIGNS.md) names targets (kernel type, backend, shape, dtype, share of the
// workload) and GPU models; it holds one study per (target, GPU model). A study proposes
// configurations of the target's search space with a strategy (coordinator/search/strategy.h),
// a few at a time as worker slots of its model free up, and stops on its budget, its plateau rule
// or the roofline (coordinator/search/allocation.h). Free slots go to the studies of a campaign by
// Amdahl's law (search::allocate).
//
// Nothing here keeps state between calls: a study's history is rebuilt from the campaign's job
// records (the configurations, JobSpec::study names the study) and their result rows (the
// latencies), with queued and leased jobs as trials without a value. Job ids are
// "<campaign_id>-s<study>-<trial>", the trial number counting the study's jobs so far, and every
// proposal is stored as a job record before it is dispatched; so a coordinator that restarts
// replays the same history from the store, proposes from where the old one stopped and never
// runs a configuration twice. The first trial of every study is the starter's default
// configuration for the dtype (the campaign's own defaults with a custom space), then its
// target's `start` configurations (known good variants, say), then the strategy's proposals.
//
// Pure functions of their arguments; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/job.h"
#include "common/protocol.h"
#include "common/status.h"
#include "coordinator/search/allocation.h"
#include "coordinator/search/strategy.h"
#include "kernels/registry.h"

namespace ak {

// One study: a target on one GPU model.
struct StudyDef {
  int index = 0;                 // position in StudyCampaign::studies; JobSpec::study
  std::string kernel_type;
  Backend backend = Backend::kCpu;
  std::vector<int64_t> shape;
  DType dtype = DType::kF32;
  std::string gpu_model;         // as workers report it ("NVIDIA H200"); "cpu" for the cpu backend
  double share = 0;              // f of Amdahl's law
  std::string label;             // "softmax 4096x4096 bf16 on NVIDIA H200"
  // The target's `start` configurations, each completed with the defaults for this dtype: tried
  // in order right after the default one, each once, before the strategy proposes; one a GPU
  // model cannot launch (shared memory) is passed over.
  std::vector<search::Config> start;
};

struct StudyCampaign {
  std::string name;
  std::string strategy = "evolutionary";
  uint64_t seed = 1;
  search::StrategyOptions options;  // without the feasibility predicate (made per study)
  size_t budget_trials = 64;
  search::StopRule rule;            // plateau window, roofline fraction, wall budget
  double min_improvement = 0.01;    // of the plateau rule
  std::string source;               // custom candidate; empty: each kernel's starter
  std::vector<kernels::Tunable> space;  // the custom candidate's tunables; empty: the starter's
  JobSpec base;                     // measure, timeout, tag, description of every job
  std::vector<StudyDef> studies;
};

inline bool is_study_document(const nlohmann::json& doc) {
  return doc.is_object() && doc.contains("kind") && doc["kind"].is_string() && doc["kind"] == "study";
}

// Validates and expands a study document. Errors (kInvalidArgument) name the key at fault.
Result<StudyCampaign> parse_study_campaign(const nlohmann::json& doc);

// The campaign record of a submitted study document (the definition keeps "source": new jobs
// are made from it after a restart).
CampaignRecord study_record(const StudyCampaign& c, const nlohmann::json& doc, const std::string& campaign_id,
                            int64_t wall_ms);

// Where a study stands.
struct StudyStatus {
  int index = 0;
  std::string label;
  std::string gpu_model;
  std::vector<search::Trial> history;  // in trial order, in-flight jobs with value nullopt
  size_t trials = 0;                   // finished, failed ones included
  size_t in_flight = 0;
  size_t passed = 0;
  std::optional<double> best_us;
  std::string best_job_id;
  // The best trial's own speedup: its latency against the PyTorch time measured in the same job
  // (its result row's speedup_vs_pytorch), the one figure a study's table and its row share.
  double best_speedup = 0;
  std::map<std::string, int64_t> best_config;
  double baseline_us = 0;              // the PyTorch op: median over the study's passing results
  double roofline_us = 0;              // 0: unknown
  size_t since_improvement = 0;
  search::StopReason stop = search::StopReason::kNone;
  bool done = false;                   // stop reason holds, or the feasible space is used up
  double eta_s = -1;                   // remaining budget at the study's trial rate; -1 unknown
  search::Target target;               // the allocation's view
};

struct StudyProgress {
  std::vector<StudyStatus> studies;
  // End-to-end estimate per GPU model: 1 / (1 - sum f (1 - 1/s)) over that model's studies.
  std::map<std::string, double> amdahl;
  bool complete = false;  // every study done and nothing in flight
};

// The shared memory per block [bytes] that connected workers announced
// (Capabilities::shared_memory_per_block_bytes), by GPU model key (gpu_model_key). Where workers of
// one model announce different limits the smallest holds; a model none of whose workers announced
// one is absent.
using SharedMemoryLimits = std::map<std::string, int64_t>;
void add_shared_memory_limit(const Capabilities& worker, SharedMemoryLimits* limits);

// The progress of campaign `c` from its jobs (any order; others are ignored) and result rows.
// shared_memory: what workers announced (see shared_memory_limit).
StudyProgress study_progress(const StudyCampaign& c, const std::string& campaign_id, int64_t submitted_wall_ms,
                             const std::vector<const JobRecord*>& jobs,
                             const std::map<std::string, ResultRecord>& results, int64_t now_wall_ms,
                             const SharedMemoryLimits& shared_memory = {});

// New jobs for free worker slots: free_slots maps a GPU model (lower case; "cpu") to the slots
// of that model no job holds or waits for; what the proposals take is subtracted. Studies that
// are done get nothing. shared_memory: what workers announced (see shared_memory_limit).
std::vector<JobSpec> propose_study_jobs(const StudyCampaign& c, const std::string& campaign_id,
                                        const StudyProgress& progress, std::map<std::string, int64_t>* free_slots,
                                        const SharedMemoryLimits& shared_memory = {});

// The study's row of a STATUS reply.
protocol::StudyRow study_status_row(const StudyStatus& s);

// The key of a GPU model in free_slots: the name in lower case (workers' names and campaigns'
// gpu_models compare case-insensitively, as Scheduler matches them).
std::string gpu_model_key(std::string model);

// "<campaign_id>-s<study, 3 digits>-<trial, 6 digits>"
std::string study_job_id(const std::string& campaign_id, int study, size_t trial);

// Largest dynamic + static shared memory per block [bytes] that the GPU model allows, used to
// prune cuda configs: what its workers announced, and only where none did (0: unknown, or a worker
// from before the field) a guess by name: H100/H200/GH200 227 KiB, A100/A800 163 KiB, else 99 KiB.
int64_t shared_memory_limit(const std::string& gpu_model, const SharedMemoryLimits& announced = {});

}  // namespace ak
