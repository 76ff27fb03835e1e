#include "cli/extract.h"

#include <algorithm>

#include "kernels/registry.h"

namespace ak::cli {

using nlohmann::json;

namespace {

// Why the kernel type cannot take this target as it is, or "".
std::string unsupported(const protocol::ModelTargetRow& t, const ExtractOptions& o) {
  const kernels::KernelSpec* spec = kernels::find(t.kernel_type);
  if (!spec) return "no kernel type '" + t.kernel_type + "'";
  const auto backend = parse_backend(o.backend);
  if (!backend || !spec->backends.count(*backend)) return t.kernel_type + " has no " + o.backend + " backend";
  const auto dtype = parse_dtype(t.dtype);
  if (!dtype || std::find(spec->dtypes.begin(), spec->dtypes.end(), *dtype) == spec->dtypes.end())
    return t.kernel_type + " has no " + t.dtype + " variant";
  if (t.layout.is_object()) {
    if (t.layout.contains("batch"))
      return "a batched matmul (batch " + t.layout["batch"].dump() + ") is not a kernel type yet";
    if (t.layout.contains("kv_heads"))
      return "grouped-query attention (" + t.layout["kv_heads"].dump() + " KV heads) is not a kernel type yet";
    if (t.layout.contains("kv_seq")) return "attention with a key length of its own is not a kernel type yet";
    if (t.layout.contains("mask")) return "masked attention is not a kernel type yet";
    if (t.layout.contains("eps")) {
      std::string family;  // the types of this norm, one per eps: "rmsnorm, rmsnorm_e5"
      for (const kernels::KernelSpec* k : kernels::all())
        if (k->name == t.kernel_type || k->family == t.kernel_type) family += (family.empty() ? "" : ", ") + k->name;
      return "eps " + t.layout["eps"].dump() + ": no " + t.kernel_type + " kernel type computes with it (" + family +
             ": kernels/" + t.kernel_type + "/spec.cc); another eps is not a kernel type yet";
    }
    for (const char* arg : {"weight", "bias"})
      if (t.layout.contains(arg)) return "a " + t.kernel_type + " without a " + arg + " is not a kernel type yet";
    if (!t.layout.empty()) return "layout " + t.layout.dump() + " is not a kernel type's";
  }
  if (spec->check_shape) {
    const std::string why = spec->check_shape(t.shape);
    if (!why.empty()) return why;
  }
  return "";
}

// The type's known good variants (kernels/registry.h, BackendSource::starts) that the target's
// dtype can build, for its study to try right after the default.
json starts(const protocol::ModelTargetRow& t, const ExtractOptions& o) {
  json out = json::array();
  const kernels::KernelSpec* spec = kernels::find(t.kernel_type);
  const std::optional<DType> dtype = parse_dtype(t.dtype);
  if (o.backend != "cuda" || !spec || !dtype) return out;
  const auto src = spec->backends.find(Backend::kCuda);
  if (src == spec->backends.end()) return out;
  for (const auto& given : src->second.starts) {
    const auto full = kernels::complete_config(src->second, *dtype, given, spec->cuda_config_error);
    if (spec->cuda_config_error && !spec->cuda_config_error(full, *dtype).empty()) continue;
    out.push_back(given);
  }
  return out;
}

}  // namespace

Extraction extract(const protocol::ModelProfile& profile, const ExtractOptions& o) {
  Extraction x;
  for (const auto& t : profile.targets) {
    ExtractedTarget e;
    e.target = t;
    e.why = unsupported(t, o);
    if (e.why.empty() && t.share < o.min_share) e.why = "share below --min-share " + std::to_string(o.min_share);
    e.kept = e.why.empty();
    if (e.kept) x.kept_share += t.share;
    x.targets.push_back(std::move(e));
  }
  std::stable_sort(x.targets.begin(), x.targets.end(),
                   [](const ExtractedTarget& a, const ExtractedTarget& b) { return a.target.share > b.target.share; });
  json targets = json::array();
  for (const auto& e : x.targets) {
    if (!e.kept) continue;
    json t = {{"kernel_type", e.target.kernel_type},
              {"shape", e.target.shape},
              {"dtype", e.target.dtype},
              {"share", e.target.share}};
    if (json start = starts(e.target, o); !start.empty()) t["start"] = std::move(start);
    targets.push_back(std::move(t));
  }
  if (targets.empty()) return x;
  const std::string gpu = !o.gpu_model.empty() ? o.gpu_model : profile.gpu.value_or("");
  x.campaign = {{"kind", "study"},
                {"name", profile.model + " targets"},
                {"description", "the targets of " + profile.model + "'s " + profile.mode + " profile (" +
                                    profile.dtype + "), with their shares of its device time"},
                {"strategy", o.strategy},
                {"backend", o.backend},
                {"budget", {{"trials", o.budget_trials}}},
                {"targets", std::move(targets)}};
  if (o.backend != "cpu" && !gpu.empty()) x.campaign["gpu_models"] = {gpu};
  return x;
}

}  // namespace ak::cli
