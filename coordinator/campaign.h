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

#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/job.h"
#include "common/status.h"

namespace ak {

namespace kernels {
struct KernelSpec;
}

// Jobs name their candidate source by hash (JobSpec::source_hash) and `sources` holds each text
// once, so a campaign of N jobs holds one copy of its source, not N (issue 19).
struct PlannedCampaign {
  CampaignRecord record;
  std::vector<JobSpec> jobs;
  std::map<std::string, std::string> sources;  // xxh64_hex(text) -> text
};

// kInvalidArgument unless `obj` is an object whose keys are all in `keys`: "unknown key '<k>' in
// <where>; see <doc>". Shared by every kind of campaign document.
Status check_keys(const nlohmann::json& obj, const std::set<std::string>& keys, const std::string& where,
                  const std::string& doc);

// The record of a campaign planned from `doc`: its id, name, the document, the count of `jobs` and
// the submission time. Shared by every kind of campaign document.
CampaignRecord campaign_record(const nlohmann::json& doc, const std::string& campaign_id, const std::string& name,
                               size_t jobs, int64_t wall_ms);

// What the coordinator lets one campaign ask for (common/PROTOCOL.md, "Limits"; CAMPAIGNS.md).
struct PlanLimits {
  // Jobs one SUBMIT may plan; more is refused naming the count and the cap (--max-jobs-per-submit).
  int64_t max_jobs = 20'000;
  // The least data one call of a job moves (KernelSpec::bytes: inputs and outputs) [bytes].
  double max_shape_bytes = 64.0 * (int64_t{1} << 30);
  // The largest device memory announced by the connected workers of each backend [bytes]; a job
  // whose data does not fit is refused at planning. A backend absent here: nothing is known.
  std::map<Backend, int64_t> device_memory_bytes;
};

// Bounds of the per-job fields every campaign kind shares.
inline constexpr int64_t kMinTimeoutMs = 1'000;
inline constexpr int64_t kMaxTimeoutMs = 3'600'000;

// A JSON number that must be an integer within [lo, hi]: a float with a fraction, a number out of
// range (1e30) or another type is kInvalidArgument "'<field>' must be an integer within lo..hi,
// got <what>" instead of a conversion.
Result<int64_t> integer_in(const nlohmann::json& v, const std::string& field, int64_t lo, int64_t hi);
// A finite JSON number within [lo, hi]; the same error otherwise.
Result<double> number_in(const nlohmann::json& v, const std::string& field, double lo, double hi);
// `timeout_ms` of a campaign document (within kMinTimeoutMs..kMaxTimeoutMs), or `fallback`.
Result<int64_t> read_timeout_ms(const nlohmann::json& doc, int64_t fallback);
// `measure` of a campaign document: each key checked against its range (CAMPAIGNS.md), missing
// keys keep their defaults, unknown keys are refused.
Result<MeasureOptions> read_measure(const nlohmann::json& doc);

// A shape: a list of 1 to 8 integer dimensions, each within 0..2^40 (integer_in's errors; the
// kernel's check_shape refuses a 0 with its own reason).
Result<std::vector<int64_t>> read_shape(const nlohmann::json& v);
// kInvalidArgument when one call of `spec` at `shape` and `dtype` moves more than
// limits.max_shape_bytes, or more than the device memory limits knows for `backend`.
Status check_shape_size(const kernels::KernelSpec& spec, const std::vector<int64_t>& shape, DType dtype,
                        Backend backend, const PlanLimits& limits);

Result<PlannedCampaign> plan_campaign(const nlohmann::json& doc, const std::string& campaign_id, int64_t wall_ms,
                                      const PlanLimits& limits = {});

// The campaign `autokernel run` submits when none is given: the softmax starter at the kernel's
// default shapes and dtypes on `backend`, in every configuration of its search space on the cpu
// and triton backends, and on cuda in the 24 of its two-pass path (AK_CACHE 0, AK_VEC at most 4:
// 288 jobs, the fixed workload of bench/throughput.sh, as examples/campaigns/softmax_h200.toml).
nlohmann::json default_campaign(Backend backend);

}  // namespace ak
