// Model campaigns (document "kind": "model", models/README.md): a model's profile, or its verify
// with tuned kernels plugged in, on a worker, as one job per GPU model (common/job.h ModelTask) that
// the worker runs with the model pipeline's Python (models/profile_model.py, verify_model.py)
// instead of the kernel sandbox. A user's model file travels inside the document (`model_code`),
// so the coordinator reads no files.
//
//   {"kind": "model", "name": "...", "task": "profile" | "verify",
//    "model": "examples/gpt2" | "examples/llama:7b-4l" | "hf:bert" | "<file name>",
//    "model_code": "<the file's text>",   // exactly when "model" names a file (ends in .py)
//    "backend": "cuda" | "cpu",           // the workers that run it
//    "gpu_models": ["NVIDIA H200", ...],  // optional: one profile per model (cuda)
//    "dtype": "bf16", "compile": false, "iters": 5, "warmup": 3,
//    "timeout_ms": 600000, "tag": "...", "description": "...",
//    // verify only: the tuned kernels (the export of `autokernel best --export`, or its entries;
//    // at most 1024), the profile's targets for the Amdahl prediction, the greedy decoding check;
//    // "compile" (time torch.compile too) defaults to true, "iters" to 20, "warmup" to 5.
//    // Kernels no faster than PyTorch's op where they were tuned are left out unless min_speedup
//    // is lowered (0: plug every kernel in).
//    "tuned": {...}, "targets": [...], "decode_tokens": 32, "min_speedup": 1.0}
// Job ids: <campaign>-<task>[-g<model index>]. Unknown keys are errors. Pure functions; thread-safe.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "coordinator/campaign.h"

namespace ak {

inline bool is_model_document(const nlohmann::json& doc) {
  return doc.is_object() && doc.contains("kind") && doc["kind"].is_string() && doc["kind"] == "model";
}

// A model's name as the pipeline takes it: "examples/NAME[:CONFIG]" (NAME and CONFIG of letters,
// digits, '_', '-', '.'), "hf:ARCH", or a file name ending in ".py" (no '/'). Empty when valid,
// else why not.
std::string check_model_name(const std::string& model);

// limits.max_jobs caps the jobs it plans.
Result<PlannedCampaign> plan_model_campaign(const nlohmann::json& doc, const std::string& campaign_id, int64_t wall_ms,
                                            const PlanLimits& limits = {});

}  // namespace ak
