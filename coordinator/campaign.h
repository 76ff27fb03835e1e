// Campaign planner: turns a campaign document into jobs. Documented with examples in
// coordinator/CAMPAIGNS.md.
//
// A campaign document (JSON; the CLI also accepts the same keys in TOML) for a kernel search:
//   {"name": "softmax-default",          // optional, for people
//    "kernel_type": "softmax",           // a registry name (kernels/registry.h)
//    "backend": "cpu" | "cuda",
//    "shapes": [[64, 1024], ...],        // optional: the kernel's default shapes for the backend
//    "dtypes": ["fp32", "fp16", "bf16"], // optional: every dtype of the kernel
//    "configs": "all" | "default" | [{"AK_VEC": 4, ...}, ...],   // optional: "all"
//    "repeat": 1,                        // optional: each (shape, dtype, config) this many times
//    "source": "...",                    // optional: candidate source replacing the starter
//    "description": "...",               // optional: copied to every job
//    "requires": {"gpu_model": "NVIDIA H200", "arch": "sm_90a"},  // optional
//    "timeout_ms": 60000,                // optional: per attempt
//    "measure": {"warmup": 3, "min_samples": 10, "max_samples": 200, "max_time_ms": 1000}}
// Every unknown key is an error (a typo must not silently change a campaign). Pure functions;
// thread-safe.
#pragma once

#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/job.h"
#include "common/status.h"

namespace ak {

struct PlannedCampaign {
  CampaignRecord record;
  std::vector<JobSpec> jobs;
};

// kInvalidArgument unless `obj` is an object whose keys are all in `keys`: "unknown key '<k>' in
// <where>; see <doc>". Shared by every kind of campaign document.
Status check_keys(const nlohmann::json& obj, const std::set<std::string>& keys, const std::string& where,
                  const std::string& doc);

Result<PlannedCampaign> plan_campaign(const nlohmann::json& doc, const std::string& campaign_id,
                                      int64_t wall_ms);

// The campaign `autokernel run` submits when none is given: every configuration of the softmax
// search space at the kernel's default shapes and dtypes on `backend`.
nlohmann::json default_campaign(Backend backend);

}  // namespace ak
