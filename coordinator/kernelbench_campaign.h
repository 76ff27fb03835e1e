// KernelBench campaigns (document "kind": "kernelbench"): a baseline sweep (each problem's eager
// and torch.compile time per GPU model) or a candidate sweep (one job per sample of a folder of
// generations), planned into KernelBench jobs (common/job.h KernelBenchTask) that workers run
// through the harness (kernelbench/HARNESS.md). The CLI builds the documents from a local
// checkout (`autokernel kb baseline|sweep`, cli/kernelbench_command.cc): the problems' and
// samples' code travels inside the document, so the coordinator reads no files.
//
//   {"kind": "kernelbench", "name": "...", "task": "baseline" | "candidates",
//    "backend": "cuda" | "cpu",              // the workers that run it
//    "gpu_models": ["NVIDIA H200", ...],     // optional: one job per model (cuda)
//    "precision": "fp32", "seed": 42, "num_correct_trials": 5, "num_perf_trials": 100,
//    "strict": true, "switches": {...}, "timeout_ms": 180000,
//    "baselines": ["eager", "compile"],      // task baseline; "compile" = inductor's default
//                                            // mode, "compile-max-autotune" = max-autotune
//    "problems": [{"level", "problem_id", "name", "code"}, ...],
//    "samples": [{"level", "problem_id", "sample_id", "code", "backend"}, ...]}  // candidates
// Job ids: <campaign>-kb-l<level>-p<id, 3 digits>-<eager|compile...|s<sample>>[-g<model index>].
// Unknown keys are errors. Pure functions; thread-safe.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "coordinator/campaign.h"

namespace ak {

inline bool is_kernelbench_document(const nlohmann::json& doc) {
  return doc.is_object() && doc.contains("kind") && doc["kind"].is_string() && doc["kind"] == "kernelbench";
}

// limits.max_jobs caps the jobs it plans (counted before any is built); the other limits do not
// apply (KernelBench problems have no kernel spec).
Result<PlannedCampaign> plan_kernelbench_campaign(const nlohmann::json& doc, const std::string& campaign_id,
                                                  int64_t wall_ms, const PlanLimits& limits = {});

}  // namespace ak
